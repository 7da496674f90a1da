package broker

import (
	"context"
	"strings"
)

// Profile is what the service must do differently per broker product, chosen from the
// server header of the broker's CONNECTED frame. Everything else the service relies on
// behaves the same on ActiveMQ Classic 5.17 and RabbitMQ 3.10 (see conformance_test.go).
type Profile struct {
	// Name is the broker product, for logs: "ActiveMQ", "RabbitMQ" or "unknown".
	Name string
	// DurableCommit tells whether the RECEIPT for a COMMIT means that the transaction's
	// messages are stored. ActiveMQ: yes, it answers after the journal write. RabbitMQ: no,
	// it answers as soon as the buffered SENDs have been handed to the queues, before they
	// are persisted (only a SEND's own receipt waits for the publisher confirm); measured
	// with RabbitMQ 3.10.8: a transaction of 300 persistent messages committed with a receipt,
	// followed at once by kill -9 of the broker, was gone after the restart (4 times of 4),
	// while every message sent with its own receipt survived. Without it, several messages
	// must be sent one by one, each with its own receipt (Conn.sendEach).
	DurableCommit bool
}

// profileFor returns the profile for the server header of a CONNECTED frame (for example
// "ActiveMQ/5.17.2" or "RabbitMQ/3.10.8"). An unknown or empty header gets the careful
// profile: nothing is assumed that was not measured.
func profileFor(server string) Profile {
	product, _, _ := strings.Cut(server, "/")
	switch product {
	case "ActiveMQ": // ActiveMQ Classic; Artemis says "ActiveMQ-Artemis/..."
		return Profile{Name: "ActiveMQ", DurableCommit: true}
	case "RabbitMQ":
		return Profile{Name: "RabbitMQ", DurableCommit: false}
	}
	return Profile{Name: "unknown", DurableCommit: false}
}

// sendEach sends msgs one by one, in order, each confirmed by its own receipt: the way to be
// sure the broker holds all of them when its COMMIT receipt does not say so. Unlike one
// transaction it is not all or nothing: after an error a prefix of msgs may already be on
// its queue, and sending the batch again duplicates that prefix (the afnemers drop the
// duplicates by admhnd-id).
func (c *Conn) sendEach(ctx context.Context, msgs []Message) error {
	for _, m := range msgs {
		if err := c.Send(ctx, m); err != nil {
			return err
		}
	}
	return nil
}
