module github.com/go-stomp/stomp/v3

go 1.15
