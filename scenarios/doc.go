// Package scenarios holds the end-to-end and robustness tests: the publisher and consumers over
// the real PostgreSQL and ActiveMQ, checked against the guarantees of docs/contract.md (nothing
// lost, per-person order, excluded untouched, in-flight cap).
package scenarios
