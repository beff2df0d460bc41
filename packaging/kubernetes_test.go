package packaging_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"burrow/config"
	"burrow/identity"
)

const manifestPath = "kubernetes/burrow.yaml"

// manifest is packaging/kubernetes/burrow.yaml decoded into the
// Kubernetes API's own types.
type manifest struct {
	namespace *corev1.Namespace
	config    *corev1.ConfigMap
	daemonSet *appsv1.DaemonSet
}

// decodeManifest decodes every document strictly: a field the API does
// not have, or one given twice, is an error, as it is for kubectl's
// server-side validation.
func decodeManifest(data []byte) (*manifest, error) {
	m := &manifest{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		var kind metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &kind); err != nil {
			return nil, err
		}
		var obj any
		switch kind.APIVersion + " " + kind.Kind {
		case "v1 Namespace":
			m.namespace = &corev1.Namespace{}
			obj = m.namespace
		case "v1 ConfigMap":
			m.config = &corev1.ConfigMap{}
			obj = m.config
		case "apps/v1 DaemonSet":
			m.daemonSet = &appsv1.DaemonSet{}
			obj = m.daemonSet
		default:
			return nil, fmt.Errorf("unexpected object %s %s", kind.APIVersion, kind.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("%s: %w", kind.Kind, err)
		}
	}
	if m.namespace == nil || m.config == nil || m.daemonSet == nil {
		return nil, errors.New("want a Namespace, a ConfigMap and a DaemonSet")
	}
	return m, nil
}

func loadManifest(t *testing.T) *manifest {
	t.Helper()
	data, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeManifest(data)
	if err != nil {
		t.Fatalf("%s: %v", manifestPath, err)
	}
	return m
}

func (m *manifest) container(t *testing.T, name string) *corev1.Container {
	t.Helper()
	spec := &m.daemonSet.Spec.Template.Spec
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	t.Fatalf("the DaemonSet has no container %s", name)
	return nil
}

func (m *manifest) volume(name string) *corev1.Volume {
	for i, v := range m.daemonSet.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return &m.daemonSet.Spec.Template.Spec.Volumes[i]
		}
	}
	return nil
}

// mountAt is the container's mount at path and its volume.
func (m *manifest) mountAt(c *corev1.Container, path string) (*corev1.VolumeMount, *corev1.Volume) {
	for i, vm := range c.VolumeMounts {
		if vm.MountPath == path {
			return &c.VolumeMounts[i], m.volume(vm.Name)
		}
	}
	return nil, nil
}

// nodeConfig loads the ConfigMap's burrow.yaml with burrow's own strict
// loader, from where the container given reads it.
func (m *manifest) nodeConfig(t *testing.T, c *corev1.Container) *config.Config {
	t.Helper()
	i := slices.Index(c.Args, "-c")
	if i < 0 || i+1 == len(c.Args) {
		t.Fatalf("%s runs %q, without -c CONFIG", c.Name, c.Args)
	}
	path := c.Args[i+1]
	vm, v := m.mountAt(c, path)
	if vm == nil || v.ConfigMap == nil || v.ConfigMap.Name != m.config.Name {
		t.Fatalf("%s reads %s, which is not mounted from ConfigMap %s", c.Name, path, m.config.Name)
	}
	file := filepath.Join(t.TempDir(), "burrow.yaml")
	if err := os.WriteFile(file, []byte(m.config.Data[vm.SubPath]), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatalf("ConfigMap %s, %s: %v", m.config.Name, vm.SubPath, err)
	}
	return cfg
}

// imageName is the image 'make image' and 'make images' build.
func imageName(t *testing.T) string {
	t.Helper()
	need(t, "make")
	return strings.TrimSpace(run(t, repoRoot, "make", "--no-print-directory", "-s", "--eval", "print-image: ; @echo $(IMAGE)", "print-image"))
}

// TestManifestDecodesStrictly shows that the decoding catches a
// misspelt field, which a lenient decoder would drop in silence.
func TestManifestDecodesStrictly(t *testing.T) {
	data, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeManifest(data); err != nil {
		t.Fatal(err)
	}
	misspelt := bytes.Replace(data, []byte("hostNetwork:"), []byte("hostNetwrok:"), 1)
	if _, err := decodeManifest(misspelt); err == nil || !strings.Contains(err.Error(), "hostNetwrok") {
		t.Errorf("a misspelt field decoded: %v", err)
	}
}

// TestManifestRunsBurrowOnEveryNode checks what the DaemonSet must get
// right for burrow and burrow-cni to work on a node: the image that
// 'make images' builds, the node's network, every node, the privileges,
// and the host paths the daemon shares with the plugin.
func TestManifestRunsBurrowOnEveryNode(t *testing.T) {
	m := loadManifest(t)
	ds := m.daemonSet
	for _, obj := range []metav1.ObjectMeta{m.config.ObjectMeta, ds.ObjectMeta} {
		if obj.Namespace != m.namespace.Name {
			t.Errorf("%s is in namespace %q, not the manifest's %q", obj.Name, obj.Namespace, m.namespace.Name)
		}
	}
	pod := ds.Spec.Template.Spec
	if sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector); err != nil || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
		t.Errorf("the DaemonSet's selector %v does not select its pods %v: %v", ds.Spec.Selector, ds.Spec.Template.Labels, err)
	}
	if !pod.HostNetwork {
		t.Error("the pods are not on the host's network: the TAP and the container bridge would be the pod's")
	}
	if len(pod.NodeSelector) > 0 || pod.Affinity != nil {
		t.Errorf("the pods are kept off some nodes (nodeSelector %v, affinity %v): amd64 and arm64 nodes alike need burrow", pod.NodeSelector, pod.Affinity)
	}
	if !slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == "" && tol.Operator == corev1.TolerationOpExists && tol.Effect == ""
	}) {
		t.Errorf("tolerations %v do not tolerate every taint: control-plane and not-ready nodes need burrow too", pod.Tolerations)
	}

	image := imageName(t)
	install, daemon := m.container(t, "install-cni"), m.container(t, "burrow")
	for _, c := range []*corev1.Container{install, daemon} {
		if c.Image != image {
			t.Errorf("container %s runs image %s; make images builds %s", c.Name, c.Image, image)
		}
	}

	cfg := m.nodeConfig(t, daemon)
	for _, c := range []*corev1.Container{install, daemon} {
		if len(c.Command) > 0 {
			t.Errorf("container %s runs %q instead of the image's burrow", c.Name, c.Command)
		}
	}
	if len(daemon.Args) == 0 || daemon.Args[0] != "up" {
		t.Errorf("the daemon container runs burrow %q, not burrow up", daemon.Args)
	}
	if !cfg.Services.Subnets.Enabled {
		t.Error("services.subnets is off: burrow-cni would have no addresses to give")
	}
	privileged := daemon.SecurityContext != nil && daemon.SecurityContext.Privileged != nil && *daemon.SecurityContext.Privileged
	if !privileged {
		t.Error("the daemon is not privileged: it writes forwarding and proxy_arp in /proc/sys/net, read-only otherwise")
	}
	// Paths the daemon shares with the node, at the same place on both.
	hostPaths := map[string]corev1.HostPathType{
		"/dev/net/tun":                  corev1.HostPathCharDev,
		cfg.StateDir:                    corev1.HostPathDirectoryOrCreate,
		filepath.Dir(cfg.ControlSocket): corev1.HostPathDirectoryOrCreate,
		cfg.Services.Subnets.MachineID:  corev1.HostPathFile,
	}
	for path, kind := range hostPaths {
		vm, v := m.mountAt(daemon, path)
		if vm == nil || v == nil || v.HostPath == nil || v.HostPath.Path != path || v.HostPath.Type == nil || *v.HostPath.Type != kind || vm.SubPath != "" {
			t.Errorf("the daemon does not mount the node's %s (%s) at the same path", path, kind)
		}
	}

	// The node's identity: the Secret's ca.crt, NODE.crt and NODE.key.
	for path, key := range map[string]string{
		cfg.CA:                                  "ca.crt",
		cfg.Cert:                                "$(NODE_NAME).crt",
		filepath.Join(cfg.StateDir, "node.key"): "$(NODE_NAME).key",
	} {
		vm, v := m.mountAt(daemon, path)
		if vm == nil || v == nil || v.Secret == nil || vm.SubPath+vm.SubPathExpr != key {
			t.Errorf("the daemon's %s is not the Secret's %s", path, key)
		}
	}
	if v := m.volume("node-identity"); v == nil || v.Secret == nil || v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o077 != 0 {
		t.Error("the Secret volume node-identity does not give its files mode 0400 or 0600: burrow refuses a key that group or others can read")
	}
	if !slices.ContainsFunc(daemon.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}) {
		t.Error("NODE_NAME, which picks the node's files of the Secret, is not the node's name")
	}

	// burrow cni install writes into the node's CNI directories, with the
	// configuration the daemon runs.
	if installCfg := m.nodeConfig(t, install); installCfg.ControlSocket != cfg.ControlSocket || installCfg.StateDir != cfg.StateDir {
		t.Error("install-cni reads another configuration than the daemon")
	}
	if len(install.Args) < 2 || install.Args[0] != "cni" || install.Args[1] != "install" {
		t.Fatalf("install-cni runs %q, not burrow cni install", install.Args)
	}
	for flag, host := range map[string]string{"--cni-bin-dir": "/opt/cni/bin", "--conf-dir": "/etc/cni/net.d"} {
		i := slices.Index(install.Args, flag)
		if i < 0 || i+1 == len(install.Args) {
			t.Errorf("install-cni does not pass %s", flag)
			continue
		}
		if vm, v := m.mountAt(install, install.Args[i+1]); vm == nil || v == nil || v.HostPath == nil || v.HostPath.Path != host {
			t.Errorf("install-cni's %s %s is not the node's %s", flag, install.Args[i+1], host)
		}
	}
}

// nodeSecret makes the Secret's data the way docs/kubernetes.md tells
// operators to, with burrow's own commands, for the nodes named, and
// kubectl's client-side dry run where kubectl is installed.
func nodeSecret(t *testing.T, m *manifest, network string, nodes ...string) map[string][]byte {
	t.Helper()
	need(t, "go")
	dir := t.TempDir()
	burrow := filepath.Join(dir, "burrow")
	run(t, repoRoot, "go", "build", "-o", burrow, "./cmd/burrow")
	run(t, dir, burrow, "ca", "init", "--network", network, "--dir", "ca")
	if err := os.Mkdir(filepath.Join(dir, "secret"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, node := range nodes {
		run(t, dir, burrow, "key", "generate", "--state", "keys/"+node)
		run(t, dir, burrow, "cert", "sign", "--ca", "ca", "--name", node, "--state", "keys/"+node, "--out", "secret/"+node+".crt")
		run(t, dir, "cp", "keys/"+node+"/node.key", "secret/"+node+".key")
	}
	run(t, dir, "cp", "ca/ca.crt", "secret/ca.crt")

	identityVolume := m.volume("node-identity")
	if identityVolume == nil || identityVolume.Secret == nil {
		t.Fatal("the DaemonSet has no Secret volume node-identity")
	}
	secretName := identityVolume.Secret.SecretName
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Log("kubectl is not installed: taking the directory's files as kubectl would")
		data := map[string][]byte{}
		entries, err := os.ReadDir(filepath.Join(dir, "secret"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if data[e.Name()], err = os.ReadFile(filepath.Join(dir, "secret", e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		return data
	}
	out := run(t, dir, "kubectl", "create", "secret", "generic", secretName, "--namespace", m.namespace.Name,
		"--from-file=secret/", "--dry-run=client", "--output=yaml")
	var secret corev1.Secret
	if err := yaml.UnmarshalStrict([]byte(out), &secret); err != nil {
		t.Fatalf("kubectl's Secret: %v\n%s", err, out)
	}
	if secret.Name != secretName || secret.Namespace != m.namespace.Name {
		t.Errorf("kubectl made Secret %s/%s", secret.Namespace, secret.Name)
	}
	return secret.Data
}

// TestNodeSecretAsDocumented makes the Secret as documented, puts each
// node's files where the DaemonSet mounts them, and checks that they are
// what the daemon will load: a CA of the ConfigMap's network, and a
// certificate it signed for the node's name and key.
func TestNodeSecretAsDocumented(t *testing.T) {
	m := loadManifest(t)
	daemon := m.container(t, "burrow")
	cfg := m.nodeConfig(t, daemon)
	nodes := []string{"worker-1", "pi-4.edge"}
	data := nodeSecret(t, m, cfg.Network, nodes...)
	for _, node := range nodes {
		// The node's view of the pod: the Secret's files at their mounts.
		root := filepath.Join(t.TempDir(), node)
		for _, vm := range daemon.VolumeMounts {
			v := m.volume(vm.Name)
			if v.Secret == nil {
				continue
			}
			source := secretFile(t, v, vm, node, data)
			path := filepath.Join(root, vm.MountPath)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(source, path); err != nil {
				t.Fatal(err)
			}
		}
		trust, err := identity.LoadTrust(filepath.Join(root, cfg.CA))
		if err != nil {
			t.Fatal(err)
		}
		if trust.Network() != cfg.Network {
			t.Errorf("the CA is of network %q, the ConfigMap's %q", trust.Network(), cfg.Network)
		}
		cert, err := identity.LoadCertificate(filepath.Join(root, cfg.Cert))
		if err != nil {
			t.Fatal(err)
		}
		key, err := identity.LoadNodeKey(filepath.Join(root, cfg.StateDir, identity.NodeKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		if cert.Name != node || cert.PublicKey != key.Public {
			t.Errorf("node %s got the certificate of %s, or one for another key", node, cert.Name)
		}
		if err := trust.Verify(cert, time.Now()); err != nil {
			t.Errorf("node %s's certificate: %v", node, err)
		}
	}
}

// secretFile writes the file a Secret volume mount shows on node, with
// $(NODE_NAME) put in and the volume's mode, and returns its path.
func secretFile(t *testing.T, v *corev1.Volume, vm corev1.VolumeMount, node string, data map[string][]byte) string {
	t.Helper()
	key := vm.SubPath + strings.ReplaceAll(vm.SubPathExpr, "$(NODE_NAME)", node)
	content, ok := data[key]
	if !ok {
		t.Fatalf("the Secret has no %s for node %s", key, node)
	}
	path := filepath.Join(t.TempDir(), key)
	if err := os.WriteFile(path, content, os.FileMode(*v.Secret.DefaultMode)); err != nil {
		t.Fatal(err)
	}
	return path
}
