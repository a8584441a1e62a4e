// A device plugin for the real-node tier: advertises --count devices of --resource to the
// kubelet it registers with, and hands a container NVIDIA_VISIBLE_DEVICES for what it got.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	api "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type server struct {
	api.UnimplementedDevicePluginServer
	devices []*api.Device
	done    <-chan struct{}
}

func (s *server) GetDevicePluginOptions(context.Context, *api.Empty) (*api.DevicePluginOptions, error) {
	return &api.DevicePluginOptions{}, nil
}

func (s *server) ListAndWatch(_ *api.Empty, stream grpc.ServerStreamingServer[api.ListAndWatchResponse]) error {
	if err := stream.Send(&api.ListAndWatchResponse{Devices: s.devices}); err != nil {
		return err
	}
	select {
	case <-s.done:
	case <-stream.Context().Done():
	}
	return nil
}

func (s *server) Allocate(_ context.Context, request *api.AllocateRequest) (*api.AllocateResponse, error) {
	response := &api.AllocateResponse{}
	for _, container := range request.ContainerRequests {
		fmt.Println("deviceplugin: allocate", strings.Join(container.DevicesIds, ","))
		response.ContainerResponses = append(response.ContainerResponses, &api.ContainerAllocateResponse{
			Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(container.DevicesIds, ",")}})
	}
	return response, nil
}

func main() {
	socketDir := flag.String("socket-dir", "/var/lib/kubelet/device-plugins", "the kubelet's device plugin folder")
	resource := flag.String("resource", "nvidia.com/gpu", "extended resource name")
	count := flag.Int("count", 8, "devices to advertise")
	flag.Parse()
	if err := run(*socketDir, *resource, *count); err != nil {
		fmt.Fprintln(os.Stderr, "deviceplugin:", err)
		os.Exit(1)
	}
}

func run(dir, resource string, count int) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	name := strings.NewReplacer("/", "-", ".", "-").Replace(resource) + ".sock"
	socket := filepath.Join(dir, name)
	_ = os.Remove(socket)
	listener, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	s := &server{done: ctx.Done()}
	for i := 0; i < count; i++ {
		s.devices = append(s.devices, &api.Device{ID: fmt.Sprintf("gpu-%d", i), Health: api.Healthy})
	}
	grpcServer := grpc.NewServer()
	api.RegisterDevicePluginServer(grpcServer, s)
	go grpcServer.Serve(listener)
	defer func() { grpcServer.Stop(); _ = os.Remove(socket) }()
	connection, err := grpc.NewClient("unix://"+filepath.Join(dir, "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer connection.Close()
	registering, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = api.NewRegistrationClient(connection).Register(registering, &api.RegisterRequest{
		Version: api.Version, Endpoint: name, ResourceName: resource}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("registering %s: %w", resource, err)
	}
	fmt.Println("deviceplugin: serving", count, resource)
	<-ctx.Done()
	return nil
}
