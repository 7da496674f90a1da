module github.com/brp/levering

go 1.26

require (
	github.com/go-stomp/stomp/v3 v3.1.5 // indirect
	github.com/jmoiron/sqlx v1.4.0 // indirect
	github.com/kelseyhightower/envconfig v1.4.0 // indirect
	github.com/lib/pq v1.10.9 // indirect
	github.com/prometheus/client_golang v1.20.5 // indirect
)
