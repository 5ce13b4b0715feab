// Package deploy holds no code: this directory carries the deployment
// artefacts (the Dockerfile, the compose file with Prometheus and Grafana,
// the systemd units, the Kubernetes manifests, the Grafana dashboard and
// the Prometheus alert rules), and its tests check them as far as a
// machine without a container engine or a Kubernetes cluster can: they
// parse every file, check what each must hold (a non-root user, a health
// check on /ready, a PodDisruptionBudget, ...), name only registered
// knobs, and run a broker and a control plane to check that every metric
// the dashboard and the rules use exists. Where promtool or
// systemd-analyze are installed the tests run them too.
package deploy
