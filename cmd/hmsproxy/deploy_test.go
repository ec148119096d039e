package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hmsproxy/hmsproxy/cmd/internal/settings"
)

// What the packaging of issue 15 ships, checked where no container
// runtime, cluster or init system is at hand: the configs it carries load
// through the same code as the binary's, the drain fits in each
// supervisor's stop timeout, and the hardening is there. helm lint,
// helm template, promtool and systemd-analyze run in scripts/deploy-check.sh,
// which also hands the rendered chart to TestRenderedChart.
const (
	dockerfile  = "../../Dockerfile"
	unitFile    = "../../deploy/systemd/hmsproxy.service"
	unitConfig  = "../../deploy/systemd/hmsproxy.yaml"
	chartValues = "../../deploy/helm/hmsproxy/values.yaml"
	alertsFile  = "../../deploy/prometheus/hmsproxy-alerts.yaml"
)

// loadFile loads a shipped config file as the binary would, with no
// environment leaking in.
func loadFile(t *testing.T, path string, args ...string) settings.File {
	t.Helper()
	t.Setenv("HMSPROXY_CONFIG", "")
	t.Setenv("HMSPROXY_ADMIN_TOKEN", "")
	c, err := load(append([]string{"-config", path}, args...))
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	return c
}

// port is the port of a listen address, "" when it has none.
func port(t *testing.T, addr string) string {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		t.Errorf("listen address %q is loopback: unreachable from outside the host or pod", addr)
	}
	return p
}

type dockerStage struct {
	from, name string
	instr      [][2]string // keyword (upper case), arguments
}

// parseDockerfile splits a Dockerfile into stages of instructions, with
// continuation lines joined and comments dropped.
func parseDockerfile(t *testing.T, path string) []dockerStage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages []dockerStage
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if l, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(l + " ")
			continue
		}
		cur.WriteString(line)
		kw, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		kw, args = strings.ToUpper(kw), strings.TrimSpace(args)
		if kw == "FROM" {
			f := strings.Fields(args)
			st := dockerStage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if kw != "ARG" {
				t.Errorf("%s before the first FROM", kw)
			}
			continue
		}
		s := &stages[len(stages)-1]
		s.instr = append(s.instr, [2]string{kw, args})
	}
	return stages
}

func (s dockerStage) all(kw string) []string {
	var out []string
	for _, in := range s.instr {
		if in[0] == kw {
			out = append(out, in[1])
		}
	}
	return out
}

// TestDockerfile: a multi-stage build of a static binary whose image runs
// as a non-root user on a distroless base, with a default config that
// loads and listens where the image says it does. Static checks only:
// no image can be built or pulled here, and Debian packages no hadolint.
func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, dockerfile)
	if len(stages) < 2 {
		t.Fatalf("%d stages; want a build stage and a runtime stage", len(stages))
	}
	build, run := stages[len(stages)-2], stages[len(stages)-1]

	static := false
	for _, r := range build.all("RUN") {
		static = static || (strings.Contains(r, "CGO_ENABLED=0") && strings.Contains(r, "go build") && strings.Contains(r, "./cmd/hmsproxy"))
	}
	if !static {
		t.Errorf("build stage %q: no RUN with CGO_ENABLED=0 go build ./cmd/hmsproxy", build.name)
	}

	if !strings.HasPrefix(run.from, "gcr.io/distroless/static") || !strings.HasSuffix(run.from, ":nonroot") {
		t.Errorf("runtime base %q; want gcr.io/distroless/static...:nonroot", run.from)
	}
	if rs := run.all("RUN"); len(rs) > 0 {
		t.Errorf("runtime stage runs %q: a distroless base has no shell", rs)
	}
	users := run.all("USER")
	if len(users) == 0 {
		t.Error("runtime stage sets no USER")
	} else {
		u, _, _ := strings.Cut(users[len(users)-1], ":")
		if n, err := strconv.Atoi(u); u == "root" || (err == nil && n == 0) {
			t.Errorf("runtime USER %q is root", users[len(users)-1])
		}
	}

	var entry []string
	if es := run.all("ENTRYPOINT"); len(es) != 1 || json.Unmarshal([]byte(es[0]), &entry) != nil || len(entry) == 0 {
		t.Fatalf("ENTRYPOINT %q; want one, in exec (JSON) form, so SIGTERM reaches the proxy and not a shell", es)
	}
	copied := map[string]string{} // destination -> source
	for _, c := range run.all("COPY") {
		f := strings.Fields(c)
		if f[0] == "--from="+build.name {
			f = f[1:]
		} else if strings.HasPrefix(f[0], "--from=") {
			t.Errorf("COPY %s: from another stage than the build", c)
		}
		copied[f[len(f)-1]] = f[0]
	}
	if _, ok := copied[entry[0]]; !ok {
		t.Errorf("ENTRYPOINT %s is not a file copied from the build stage (%v)", entry[0], copied)
	}

	// The default config: ENV HMSPROXY_CONFIG names a file the image gets
	// from the repository.
	var cfgPath string
	for _, e := range run.all("ENV") {
		if v, ok := strings.CutPrefix(e, "HMSPROXY_CONFIG="); ok {
			cfgPath = v
		}
	}
	src, ok := copied[cfgPath]
	if cfgPath == "" || !ok {
		t.Fatalf("ENV HMSPROXY_CONFIG=%q is not a file the runtime stage copies (%v)", cfgPath, copied)
	}
	c := loadFile(t, filepath.Join("../..", src), "-upstream", "thrift://hms:9083")
	exposed := strings.Fields(strings.Join(run.all("EXPOSE"), " "))
	for _, addr := range []string{c.Listen, c.Admin.Listen} {
		if p := port(t, addr); !slices.Contains(exposed, p) {
			t.Errorf("%s listens on %s; EXPOSE has %v", src, addr, exposed)
		}
	}

	ignore, err := os.ReadFile("../../.dockerignore")
	if err != nil || !slices.Contains(strings.Fields(string(ignore)), ".git") {
		t.Errorf(".dockerignore must leave out .git (the build uses -buildvcs=false): %v", err)
	}
}

// unit is a systemd unit file: section -> key -> values in order (a key
// may be given more than once).
type unit map[string]map[string][]string

func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	var sec string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			sec = strings.Trim(line, "[]")
			u[sec] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || sec == "" {
				t.Fatalf("%s: bad line %q", path, line)
			}
			u[sec][strings.TrimSpace(k)] = append(u[sec][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	return u
}

// last is the value that counts for a key given once or more; "" when
// absent. found says whether the key is there at all (an empty value is
// meaningful: CapabilityBoundingSet= drops every capability).
func (u unit) last(sec, key string) (v string, found bool) {
	vs := u[sec][key]
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// systemdSeconds parses the systemd time spans this unit can use: plain
// seconds ("45") or a single unit ("45s", "2min").
func systemdSeconds(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(strings.ReplaceAll(s, "min", "m"))
}

// TestSystemdUnit: the unit's hardening, and a stop timeout longer than
// the drain of the config it starts with (else SIGKILL cuts it short).
// systemd-analyze verify, which checks syntax and known keys, runs in
// scripts/deploy-check.sh.
func TestSystemdUnit(t *testing.T) {
	u := parseUnit(t, unitFile)
	for _, kv := range [][2]string{
		{"NoNewPrivileges", "yes"},
		{"ProtectSystem", "strict"},
		{"ProtectHome", "yes"},
		{"PrivateTmp", "yes"},
		{"PrivateDevices", "yes"},
		{"CapabilityBoundingSet", ""},
		{"AmbientCapabilities", ""},
		{"MemoryDenyWriteExecute", "yes"},
		{"SystemCallFilter", "@system-service"},
		{"KillSignal", "SIGTERM"},
		{"Restart", "on-failure"},
	} {
		if v, ok := u.last("Service", kv[0]); !ok || v != kv[1] {
			t.Errorf("[Service] %s=%q (set: %v); want %q", kv[0], v, ok, kv[1])
		}
	}
	if v, _ := u.last("Service", "DynamicUser"); v != "yes" {
		if user, _ := u.last("Service", "User"); user == "" || user == "root" || user == "0" {
			t.Errorf("neither DynamicUser=yes nor a dedicated User= (got %q)", user)
		}
	}
	fams, _ := u.last("Service", "RestrictAddressFamilies")
	for _, f := range strings.Fields(fams) {
		if !slices.Contains([]string{"AF_INET", "AF_INET6", "AF_UNIX"}, f) {
			t.Errorf("RestrictAddressFamilies allows %s; the proxy needs only TCP (and Unix sockets for the journal)", f)
		}
	}
	if fams == "" || strings.HasPrefix(fams, "~") {
		t.Errorf("RestrictAddressFamilies=%q; want an allow list", fams)
	}

	exec, _ := u.last("Service", "ExecStart")
	f := strings.Fields(exec)
	if len(f) < 3 || !filepath.IsAbs(f[0]) || f[1] != "--config" || f[2] != "/etc/hmsproxy/hmsproxy.yaml" {
		t.Errorf("ExecStart=%q; want an absolute binary with --config /etc/hmsproxy/hmsproxy.yaml", exec)
	}
	c := loadFile(t, unitConfig)
	stop, _ := u.last("Service", "TimeoutStopSec")
	d, err := systemdSeconds(stop)
	if err != nil {
		t.Fatalf("TimeoutStopSec=%q: %v", stop, err)
	}
	if d <= c.Shutdown.DrainDelay+c.Shutdown.Timeout {
		t.Errorf("TimeoutStopSec=%s is not above shutdown.drain_delay %s plus shutdown.timeout %s of %s", d, c.Shutdown.DrainDelay, c.Shutdown.Timeout, unitConfig)
	}
	files, _ := u.last("Service", "LimitNOFILE")
	if n, err := strconv.Atoi(files); err != nil || n <= c.Limits.MaxClients+c.Upstream.MaxConns*len(c.Upstream.URIs) {
		t.Errorf("LimitNOFILE=%q; want room for %d clients and %d metastore connections", files, c.Limits.MaxClients, c.Upstream.MaxConns*len(c.Upstream.URIs))
	}
	port(t, c.Admin.Listen) // reachable by a Prometheus on another host
}

// chartValuesFile is the part of the chart's values.yaml the checks read.
type chartValuesFile struct {
	ReplicaCount                  int            `yaml:"replicaCount"`
	Ports                         map[string]int `yaml:"ports"`
	Config                        map[string]any `yaml:"config"`
	TerminationGracePeriodSeconds int            `yaml:"terminationGracePeriodSeconds"`
}

// TestChartValues: the chart's default config loads (unknown keys are
// errors), the pod's grace period outlasts its drain, and more than one
// replica comes with the Redis bus that keeps them coherent.
func TestChartValues(t *testing.T) {
	b, err := os.ReadFile(chartValues)
	if err != nil {
		t.Fatal(err)
	}
	var v chartValuesFile
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", chartValues, err)
	}
	// Rendered as _helpers.tpl's hmsproxy.config does: listen and
	// admin.listen come from ports.
	cfg := v.Config
	cfg["listen"] = ":" + strconv.Itoa(v.Ports["thrift"])
	admin, _ := cfg["admin"].(map[string]any)
	if admin == nil {
		admin = map[string]any{}
	}
	admin["listen"] = ":" + strconv.Itoa(v.Ports["admin"])
	cfg["admin"] = admin
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "hmsproxy.yaml")
	if err := os.WriteFile(p, out, 0o600); err != nil {
		t.Fatal(err)
	}
	c := loadFile(t, p)
	if grace := time.Duration(v.TerminationGracePeriodSeconds) * time.Second; grace <= c.Shutdown.DrainDelay+c.Shutdown.Timeout {
		t.Errorf("terminationGracePeriodSeconds %s is not above config.shutdown.drain_delay %s plus config.shutdown.timeout %s", grace, c.Shutdown.DrainDelay, c.Shutdown.Timeout)
	}
	if v.ReplicaCount > 1 && c.Redis.URL == "" {
		t.Errorf("%d replicas and no config.redis.url: the nodes would not share invalidations", v.ReplicaCount)
	}
}

// k8sObject is the part of a rendered manifest the checks read.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec yaml.Node         `yaml:"spec"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
	TCPSocket *struct {
		Port string `yaml:"port"`
	} `yaml:"tcpSocket"`
}

type k8sDeploymentSpec struct {
	Template struct {
		Spec struct {
			TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
			SecurityContext               struct {
				RunAsNonRoot bool `yaml:"runAsNonRoot"`
				RunAsUser    int  `yaml:"runAsUser"`
			} `yaml:"securityContext"`
			Containers []struct {
				Args []string `yaml:"args"`
				Env  []struct {
					Name      string `yaml:"name"`
					ValueFrom *struct {
						SecretKeyRef *struct {
							Name string `yaml:"name"`
							Key  string `yaml:"key"`
						} `yaml:"secretKeyRef"`
					} `yaml:"valueFrom"`
				} `yaml:"env"`
				Ports []struct {
					Name          string `yaml:"name"`
					ContainerPort int    `yaml:"containerPort"`
				} `yaml:"ports"`
				Lifecycle struct {
					PreStop struct {
						Sleep struct {
							Seconds int `yaml:"seconds"`
						} `yaml:"sleep"`
					} `yaml:"preStop"`
				} `yaml:"lifecycle"`
				LivenessProbe   *k8sProbe `yaml:"livenessProbe"`
				ReadinessProbe  *k8sProbe `yaml:"readinessProbe"`
				SecurityContext struct {
					ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
					AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
				} `yaml:"securityContext"`
				VolumeMounts []struct {
					Name      string `yaml:"name"`
					MountPath string `yaml:"mountPath"`
				} `yaml:"volumeMounts"`
			} `yaml:"containers"`
			Volumes []struct {
				Name      string `yaml:"name"`
				ConfigMap *struct {
					Name string `yaml:"name"`
				} `yaml:"configMap"`
			} `yaml:"volumes"`
		} `yaml:"spec"`
	} `yaml:"template"`
}

// TestRenderedChart checks the output of helm template, given by
// scripts/deploy-check.sh in HMSPROXY_DEPLOY_MANIFESTS (files,
// comma-separated): the pod mounts the ConfigMap where --config looks,
// the config loads, its ports are the container's, the probes hit the
// admin port, the secrets reach the environment variables the binary
// reads, and the PrometheusRule holds the plain rules file's groups.
func TestRenderedChart(t *testing.T) {
	files := settings.SplitList(os.Getenv("HMSPROXY_DEPLOY_MANIFESTS"))
	if len(files) == 0 {
		t.Skip("no HMSPROXY_DEPLOY_MANIFESTS: scripts/deploy-check.sh (make deploy-check) renders the chart and runs this")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { checkManifests(t, f) })
	}
}

func checkManifests(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]k8sObject{} // kind -> the chart's one object of it
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var o k8sObject
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if o.Kind == "" {
			continue
		}
		if _, dup := objs[o.Kind]; dup {
			t.Errorf("two objects of kind %s", o.Kind)
		}
		objs[o.Kind] = o
	}
	for _, k := range []string{"Deployment", "Service", "PodDisruptionBudget", "ConfigMap"} {
		if _, ok := objs[k]; !ok {
			t.Errorf("no %s rendered", k)
		}
	}
	dep, cm := objs["Deployment"], objs["ConfigMap"]
	var spec k8sDeploymentSpec
	if err := dep.Spec.Decode(&spec); err != nil {
		t.Fatal(err)
	}
	pod := spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers; want 1", len(pod.Containers))
	}
	ctr := pod.Containers[0]

	// --config names a file in the ConfigMap's mount.
	var cfgArg string
	for _, a := range ctr.Args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			cfgArg = v
		}
	}
	vol := ""
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm.Metadata.Name {
			vol = v.Name
		}
	}
	mounted := false
	for _, m := range ctr.VolumeMounts {
		mounted = mounted || (m.Name == vol && filepath.Join(m.MountPath, filepath.Base(cfgArg)) == cfgArg)
	}
	body, ok := cm.Data[filepath.Base(cfgArg)]
	if cfgArg == "" || !mounted || !ok {
		t.Fatalf("--config=%q is not a key of ConfigMap %s mounted at its directory", cfgArg, cm.Metadata.Name)
	}
	p := filepath.Join(t.TempDir(), "hmsproxy.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c := loadFile(t, p)

	ports := map[string]string{}
	for _, cp := range ctr.Ports {
		ports[cp.Name] = strconv.Itoa(cp.ContainerPort)
	}
	if got := port(t, c.Listen); got != ports["thrift"] {
		t.Errorf("config listens on %s; container port thrift is %q", c.Listen, ports["thrift"])
	}
	if got := port(t, c.Admin.Listen); got != ports["admin"] {
		t.Errorf("config admin listens on %s; container port admin is %q", c.Admin.Listen, ports["admin"])
	}
	if pr := ctr.ReadinessProbe; pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Port != "admin" || pr.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v; want an HTTP GET of /readyz on the admin port", pr)
	}
	if pr := ctr.LivenessProbe; pr == nil || (pr.HTTPGet == nil || pr.HTTPGet.Port != "admin") && (pr.TCPSocket == nil || pr.TCPSocket.Port != "admin") {
		t.Errorf("liveness probe %+v; want one on the admin port", pr)
	}
	// The grace period runs from the preStop hook on, so the drain gets
	// what the sleep leaves of it.
	preStop := time.Duration(ctr.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	if grace := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second; grace <= preStop+c.Shutdown.DrainDelay+c.Shutdown.Timeout {
		t.Errorf("terminationGracePeriodSeconds %s is not above the preStop sleep %s plus shutdown.drain_delay %s plus shutdown.timeout %s",
			grace, preStop, c.Shutdown.DrainDelay, c.Shutdown.Timeout)
	}
	if !pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.RunAsUser == 0 {
		t.Errorf("pod security context %+v; want non-root", pod.SecurityContext)
	}
	if sc := ctr.SecurityContext; !sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container security context %+v; want a read-only root and no privilege escalation", sc)
	}

	// The secrets reach the variables the binary reads, from the chart's
	// Secret when it renders one.
	secretName := objs["Secret"].Metadata.Name
	for _, name := range []string{"HMSPROXY_ADMIN_TOKEN", "HMSPROXY_REDIS_PASSWORD", "HMSPROXY_REDIS_SENTINEL_PASSWORD"} {
		found := false
		for _, e := range ctr.Env {
			if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				found = true
				if secretName != "" && e.ValueFrom.SecretKeyRef.Name != secretName {
					t.Errorf("%s from Secret %s; the chart renders %s", name, e.ValueFrom.SecretKeyRef.Name, secretName)
				}
			}
		}
		if !found {
			t.Errorf("%s is not taken from a Secret", name)
		}
	}

	if pr, ok := objs["PrometheusRule"]; ok {
		want, err := os.ReadFile(alertsFile)
		if err != nil {
			t.Fatal(err)
		}
		var got, exp map[string]any
		if err := pr.Spec.Decode(&got); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(want, &exp); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, exp) {
			t.Errorf("PrometheusRule spec differs from %s", alertsFile)
		}
	}
	if sm, ok := objs["ServiceMonitor"]; ok {
		var s struct {
			Endpoints []struct {
				Port string `yaml:"port"`
				Path string `yaml:"path"`
			} `yaml:"endpoints"`
		}
		if err := sm.Spec.Decode(&s); err != nil {
			t.Fatal(err)
		}
		if len(s.Endpoints) != 1 || s.Endpoints[0].Port != "admin" || s.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor endpoints %+v; want /metrics on the admin port", s.Endpoints)
		}
	}
}
