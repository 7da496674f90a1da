// JMSAfnemer reads messages from a queue with ActiveMQ's own JMS client over OpenWire, as a
// Java afnemer of the verzending queue would, and prints one line per message for the Go
// tests (brptest.ReadJMS):
//
//   <JMS type>\t<JMSDeliveryMode>\t<class of the admhnd-id property>\t<admhnd-id>\t<body>
//
// where the type is TextMessage, BytesMessage or another class name, the delivery mode
// PERSISTENT or NON_PERSISTENT, and the body the text of a TextMessage (the service's bodies
// are one line of JSON) or "-" for any other message.
//
// Usage: java JMSAfnemer <broker URL> <queue name> <count> <seconds to wait for each message>
// It exits 0 after count messages, 1 when one does not come in time.
import javax.jms.BytesMessage;
import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.Session;
import javax.jms.TextMessage;

import org.apache.activemq.ActiveMQConnectionFactory;

public class JMSAfnemer {
    public static void main(String[] args) throws Exception {
        String url = args[0];
        String queue = args[1];
        int count = Integer.parseInt(args[2]);
        long waitMillis = Long.parseLong(args[3]) * 1000;
        Connection conn = new ActiveMQConnectionFactory(url).createConnection();
        try {
            conn.start();
            Session session = conn.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            MessageConsumer consumer = session.createConsumer(session.createQueue(queue));
            StringBuilder out = new StringBuilder();
            for (int i = 0; i < count; i++) {
                Message m = consumer.receive(waitMillis);
                if (m == null) {
                    System.out.print(out);
                    System.out.flush();
                    System.err.printf("JMSAfnemer: message %d of %d did not come within %d ms%n", i + 1, count, waitMillis);
                    System.exit(1);
                }
                String type = m instanceof TextMessage ? "TextMessage"
                        : m instanceof BytesMessage ? "BytesMessage" : m.getClass().getSimpleName();
                String mode = m.getJMSDeliveryMode() == DeliveryMode.PERSISTENT ? "PERSISTENT" : "NON_PERSISTENT";
                Object prop = m.getObjectProperty("admhnd-id");
                String propClass = prop == null ? "-" : prop.getClass().getSimpleName();
                String body = m instanceof TextMessage ? ((TextMessage) m).getText() : "-";
                out.append(type).append('\t').append(mode).append('\t').append(propClass).append('\t')
                        .append(m.getStringProperty("admhnd-id")).append('\t').append(body).append('\n');
                m.acknowledge();
            }
            System.out.print(out);
            System.out.flush();
        } finally {
            conn.close();
        }
    }
}
