package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// knobs are the FELIX_* knobs the binaries register: the README's table is
// generated from their registries (make knobs-readme) and a test keeps it
// equal.
func knobs(t *testing.T) map[string]bool {
	raw, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(FELIX_[A-Z0-9_]+)` \\|").FindAllStringSubmatch(string(raw), -1) {
		out[m[1]] = true
	}
	require.Greater(t, len(out), 50)
	return out
}

// requireKnobs fails on a FELIX_* name that no binary registers (a typo
// would be refused at start, or worse, ignored).
func requireKnobs(t *testing.T, where string, names []string) {
	t.Helper()
	known := knobs(t)
	require.NotEmpty(t, names, where)
	for _, n := range names {
		require.True(t, known[n], "%s sets %s, which no binary registers", where, n)
	}
}

var knobName = regexp.MustCompile(`\bFELIX_[A-Z0-9_]+`)

// The compose file runs etcd, a control plane, three brokers, Prometheus
// and Grafana; every broker has its own node credential, data volume and
// advertised address, and waits for the provisioning job.
func TestComposeFile(t *testing.T) {
	raw, err := os.ReadFile("compose/compose.yaml")
	require.NoError(t, err)
	var c struct {
		Services map[string]struct {
			Image       string
			Build       *struct{ Context, Dockerfile, Target string }
			Environment map[string]string
			DependsOn   map[string]struct{ Condition string } `yaml:"depends_on"`
			Volumes     []string
			Healthcheck *struct{ Test []string }
		}
		Volumes map[string]any
	}
	require.NoError(t, yaml.Unmarshal(raw, &c))
	for _, s := range []string{"etcd", "controlplane", "broker-1", "broker-2", "broker-3", "prometheus", "grafana", "secrets", "provision"} {
		require.Contains(t, c.Services, s)
	}
	ids := map[string]bool{}
	for _, n := range []string{"broker-1", "broker-2", "broker-3"} {
		b := c.Services[n]
		require.Equal(t, "deploy/Dockerfile", b.Build.Dockerfile)
		require.Equal(t, "service_completed_successfully", b.DependsOn["provision"].Condition, n)
		require.Equal(t, n, b.Environment["FELIX_NODE_ID"])
		require.Equal(t, n+":5000", b.Environment["FELIX_ADVERTISE_ADDR"])
		require.Contains(t, b.Environment["FELIX_NODE_TOKEN_FILE"], "node-"+n[len(n)-1:])
		require.Contains(t, b.Volumes, n+":/var/lib/felix")
		ids[b.Environment["FELIX_NODE_ID"]] = true
	}
	require.Len(t, ids, 3)
	require.Equal(t, "service_healthy", c.Services["provision"].DependsOn["controlplane"].Condition)
	require.Contains(t, strings.Join(c.Services["controlplane"].Healthcheck.Test, " "), "/v1/system/health")
	requireKnobs(t, "compose.yaml", knobName.FindAllString(string(raw), -1))
	for _, f := range []string{"../prometheus/prometheus.yml", "../grafana/provisioning", "../grafana/dashboards"} {
		_, err := os.Stat(filepath.Join("compose", f))
		require.NoError(t, err, "compose mounts %s", f)
	}
}

// The Dockerfile builds static binaries in one stage and ends in a
// non-root runtime image whose health check asks /ready.
func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	type stage struct {
		from, name string
		lines      []string
	}
	var stages []*stage
	sc := bufio.NewScanner(bytes.NewReader(raw))
	var cont string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cont += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		line, cont = cont+line, ""
		f := strings.Fields(line)
		if strings.EqualFold(f[0], "FROM") {
			s := &stage{from: f[1]}
			if len(f) == 4 && strings.EqualFold(f[2], "AS") {
				s.name = f[3]
			}
			stages = append(stages, s)
			continue
		}
		require.NotEmpty(t, stages, "an instruction before FROM: %s", line)
		stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, line)
	}
	require.GreaterOrEqual(t, len(stages), 2, "multi-stage")
	build := stages[0]
	require.Equal(t, "build", build.name)
	require.Contains(t, strings.Join(build.lines, "\n"), "CGO_ENABLED=0", "static binaries")
	final := stages[len(stages)-1]
	require.Equal(t, "runtime", final.name, "docker build without --target gives the runtime")
	body := strings.Join(final.lines, "\n")
	require.Regexp(t, `(?m)^USER 65532`, body, "non-root")
	require.Regexp(t, `(?m)^HEALTHCHECK .*CMD .*felix", "probe", "http://127.0.0.1:8080/ready"`, body)
	require.Contains(t, body, `ENTRYPOINT ["/usr/local/bin/felix-broker"]`)
	for _, s := range stages[1:] {
		require.Contains(t, strings.Join(s.lines, "\n"), "USER 65532", "stage %s runs as non-root", s.name)
	}
	requireKnobs(t, "Dockerfile", knobName.FindAllString(string(raw), -1))
}

// The systemd units start the binaries as an unprivileged user with the
// hardening a broker tolerates, and drain within their stop timeout.
func TestSystemdUnits(t *testing.T) {
	for _, unit := range []string{"felix-broker.service", "felix-controlplane.service"} {
		t.Run(unit, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("systemd", unit))
			require.NoError(t, err)
			sections := parseUnit(t, raw)
			svc := sections["Service"]
			require.NotNil(t, svc)
			require.Equal(t, []string{"felix"}, svc["User"])
			require.Regexp(t, `^/usr/local/bin/felix-(broker|controlplane)$`, svc["ExecStart"][0])
			for key, want := range map[string]string{"NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes",
				"PrivateDevices": "yes", "MemoryDenyWriteExecute": "yes", "CapabilityBoundingSet": "", "KillSignal": "SIGTERM"} {
				require.Equal(t, []string{want}, svc[key], key)
			}
			if unit == "felix-broker.service" {
				require.NotContains(t, svc, "ProcSubset", "felixtrace and /debug/felix/stats read /proc/stat")
				require.Equal(t, []string{"felix"}, svc["StateDirectory"])
			}
			require.Equal(t, []string{"multi-user.target"}, sections["Install"]["WantedBy"])
			systemdVerify(t, raw, unit)
		})
	}
}

// parseUnit reads a unit file's sections and their keys (a key given
// twice keeps both values).
func parseUnit(t *testing.T, raw []byte) map[string]map[string][]string {
	out := map[string]map[string][]string{}
	var cur map[string][]string
	for n, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			cur = map[string][]string{}
			out[line[1:len(line)-1]] = cur
		default:
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok && cur != nil, "line %d: %q is not key=value in a section", n+1, line)
			cur[k] = append(cur[k], v)
		}
	}
	return out
}

// systemdVerify runs systemd-analyze verify, where installed, on a copy
// of the unit whose ExecStart names a binary that exists.
func systemdVerify(t *testing.T, raw []byte, unit string) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: unit checked by parsing only")
		return
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "felix")
	self, err := os.Executable()
	require.NoError(t, err)
	copyFile(t, self, exe)
	fixed := regexp.MustCompile(`(?m)^ExecStart=\S+`).ReplaceAll(raw, []byte("ExecStart="+exe))
	path := filepath.Join(dir, unit)
	require.NoError(t, os.WriteFile(path, fixed, 0o644))
	out, err := exec.Command(sa, "verify", path).CombinedOutput()
	require.NoError(t, err, "systemd-analyze verify %s:\n%s", unit, out)
	// Warnings about the host (no /etc/felix/*.env, no user felix) are
	// expected here; anything about the unit itself is not.
	for _, l := range strings.Split(string(out), "\n") {
		require.NotContains(t, l, "Unknown key", l)
		require.NotContains(t, l, "Failed to parse", l)
	}
}

func copyFile(t *testing.T, from, to string) {
	in, err := os.Open(from)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

// The Kubernetes manifests run brokers as a StatefulSet on local volumes
// with a PodDisruptionBudget and readiness on /ready; each broker mints its
// own node credential and is named by its pod.
func TestKubernetesManifests(t *testing.T) {
	raw, err := os.ReadFile("kubernetes/felix.yaml")
	require.NoError(t, err)
	objs := map[string]map[string]any{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var o map[string]any
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		md := o["metadata"].(map[string]any)
		require.NotEmpty(t, o["apiVersion"])
		objs[o["kind"].(string)+"/"+md["name"].(string)] = o
	}
	for _, k := range []string{"StatefulSet/broker", "PodDisruptionBudget/felix-broker", "Service/felix-broker", "StorageClass/felix-local",
		"Deployment/felix-controlplane", "Service/felix-controlplane", "PodDisruptionBudget/felix-controlplane"} {
		require.Contains(t, objs, k)
	}
	sts := objs["StatefulSet/broker"]
	require.Equal(t, "felix-local", dig(t, sts, "spec", "volumeClaimTemplates", 0, "spec", "storageClassName"))
	broker := dig(t, sts, "spec", "template", "spec", "containers", 0).(map[string]any)
	require.Equal(t, "/ready", dig(t, broker, "readinessProbe", "httpGet", "path"))
	require.Equal(t, true, dig(t, sts, "spec", "template", "spec", "securityContext", "runAsNonRoot"))
	require.Equal(t, "felix-local", dig(t, objs["PersistentVolume/felix-node-1"], "spec", "storageClassName"))
	init := dig(t, sts, "spec", "template", "spec", "initContainers", 0, "args").([]any)
	require.Equal(t, []any{"token", "node"}, init[:2])
	require.Equal(t, 1, dig(t, objs["PodDisruptionBudget/felix-broker"], "spec", "maxUnavailable"))
	requireKnobs(t, "felix.yaml", knobName.FindAllString(string(raw), -1))
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		out, err := exec.Command(kubectl, "kustomize", "kubernetes").CombinedOutput()
		require.NoError(t, err, "kubectl kustomize:\n%s", out)
	}
}

// dig walks maps by key and lists by index.
func dig(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			require.True(t, ok, "not a map at %v", p)
			v = m[k]
		case int:
			l, ok := v.([]any)
			require.True(t, ok && k < len(l), "not a list long enough at %v", p)
			v = l[k]
		}
	}
	return v
}

// The alert rules and Prometheus's configuration load in Prometheus
// (promtool, where installed).
func TestPrometheusFiles(t *testing.T) {
	alertExprs(t)
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed: the rules are checked by parsing only")
		return
	}
	out, err := exec.Command(promtool, "check", "config", "prometheus/prometheus.yml").CombinedOutput()
	require.NoError(t, err, "promtool check config:\n%s", out)
}
