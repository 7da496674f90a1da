// Package deploy holds no code. Its directory carries the files for running the service
// elsewhere: Prometheus alert rules with their unit tests (prometheus/), a Grafana dashboard
// (grafana/) and ActiveMQ's configuration for compose.yaml (activemq/). Its tests check them
// with promtool, check that every metric the rules and the dashboard name is exported by the
// real commands, and check the compose files.
package deploy
