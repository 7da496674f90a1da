// Package deploy holds no code. Its directory carries the files for running the service
// elsewhere: Prometheus alert rules with their unit tests (prometheus/), a Grafana dashboard
// (grafana/), ActiveMQ's configuration for compose.yaml (activemq/, rendered by internal/stack
// from the one the tests' brokers run) and a Helm chart for Kubernetes (helm/brp-levering).
// Its tests check them with promtool, check that every metric the rules and the dashboard
// name is exported by the real commands, check the compose files, and lint and render the
// chart, validating the manifests with kubeconform against schemas made from the pinned
// Kubernetes and Prometheus Operator sources.
package deploy
