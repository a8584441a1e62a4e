// A DRA kubelet plugin for the real-node tier, registered under NVIDIA's driver name: it
// publishes the devices it is given as this node's pool, prepares a claim by writing a CDI spec
// (the container gets NVIDIA_VISIBLE_DEVICES for its devices) and unprepares it by removing the
// spec. Each prepare and unprepare is appended to --journal, so tests see what the kubelet asked.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

const driverName = "gpu.nvidia.com"
const cdiKind = "k8s.gpu.nvidia.com/claim"

type plugin struct {
	cdiDir, journal string
	mu              sync.Mutex
}

func (p *plugin) record(event string, claim string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.journal, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintf(f, "%s %s\n", event, claim)
		f.Close()
	}
}

func (p *plugin) specPath(uid types.UID) string {
	return filepath.Join(p.cdiDir, fmt.Sprintf("k8s.gpu.nvidia.com-claim_%s.json", uid))
}

func (p *plugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	results := map[types.UID]kubeletplugin.PrepareResult{}
	for _, claim := range claims {
		results[claim.UID] = p.prepare(claim)
	}
	return results, nil
}

func (p *plugin) prepare(claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	if claim.Status.Allocation == nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)}
	}
	var devices []kubeletplugin.Device
	var names []string
	for _, result := range claim.Status.Allocation.Devices.Results {
		if result.Driver != driverName {
			continue
		}
		names = append(names, result.Device)
		devices = append(devices, kubeletplugin.Device{Requests: []string{result.Request}, PoolName: result.Pool,
			DeviceName: result.Device, CDIDeviceIDs: []string{cdiKind + "=" + string(claim.UID)}})
	}
	env := []string{"NVIDIA_VISIBLE_DEVICES=" + strings.Join(names, ","),
		"DRA_BRIDGE_TEST_CLAIM=" + claim.Namespace + "/" + claim.Name}
	spec := map[string]any{"cdiVersion": "0.6.0", "kind": cdiKind, "devices": []any{map[string]any{
		"name": string(claim.UID), "containerEdits": map[string]any{"env": env}}}}
	body, _ := json.Marshal(spec)
	if err := os.WriteFile(p.specPath(claim.UID), body, 0o644); err != nil {
		return kubeletplugin.PrepareResult{Err: err}
	}
	p.record("prepared", claim.Namespace+"/"+claim.Name)
	return kubeletplugin.PrepareResult{Devices: devices}
}

func (p *plugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	results := map[types.UID]error{}
	for _, claim := range claims {
		err := os.Remove(p.specPath(claim.UID))
		if os.IsNotExist(err) {
			err = nil
		}
		results[claim.UID] = err
		p.record("unprepared", claim.Namespace+"/"+claim.Name)
	}
	return results, nil
}

func (p *plugin) HandleError(ctx context.Context, err error, msg string) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", msg, err)
}

func (p *plugin) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

func main() {
	node := flag.String("node", "", "node name")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig")
	kubeletDir := flag.String("kubelet-dir", "", "the kubelet's --root-dir")
	cdiDir := flag.String("cdi-dir", "", "where CDI specs go (the runtime's cdi_spec_dirs)")
	devicesFile := flag.String("devices", "", "JSON list of resource.k8s.io/v1 devices to publish")
	journal := flag.String("journal", "", "file each prepare and unprepare is appended to")
	flag.Parse()
	if err := run(*node, *kubeconfig, *kubeletDir, *cdiDir, *devicesFile, *journal); err != nil {
		fmt.Fprintln(os.Stderr, "draplugin:", err)
		os.Exit(1)
	}
}

func run(node, kubeconfig, kubeletDir, cdiDir, devicesFile, journal string) error {
	var devices []resourceapi.Device
	raw, err := os.ReadFile(devicesFile)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &devices); err != nil {
		return fmt.Errorf("%s: %w", devicesFile, err)
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	nodeObject, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	dataDir := filepath.Join(kubeletDir, "plugins", driverName)
	registry := filepath.Join(kubeletDir, "plugins_registry")
	for _, dir := range []string{dataDir, registry, cdiDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	p := &plugin{cdiDir: cdiDir, journal: journal}
	helper, err := kubeletplugin.Start(ctx, p, kubeletplugin.DriverName(driverName), kubeletplugin.KubeClient(client),
		kubeletplugin.NodeName(node), kubeletplugin.NodeUID(nodeObject.UID),
		kubeletplugin.RegistrarDirectoryPath(registry), kubeletplugin.PluginDataDirectoryPath(dataDir))
	if err != nil {
		return err
	}
	resources := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		node: {Slices: []resourceslice.Slice{{Devices: devices}}}}}
	if err := helper.PublishResources(ctx, resources); err != nil {
		return err
	}
	fmt.Println("draplugin: serving", len(devices), "devices on", node)
	<-ctx.Done()
	helper.Stop()
	return nil
}
