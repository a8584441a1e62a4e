// Command etcd runs an embedded etcd (go.etcd.io/etcd/server/v3) for the e2e control plane:
// one member, plain HTTP on loopback, data in a given folder. It stops on SIGTERM or SIGINT.
package main

import (
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "folder for the member's data")
	clientURL := flag.String("listen-client-url", "http://127.0.0.1:2379", "where clients connect")
	peerURL := flag.String("listen-peer-url", "http://127.0.0.1:2380", "where peers would connect")
	flag.Parse()

	cfg := embed.NewConfig()
	cfg.Dir = *dataDir
	cfg.LogLevel = "error"
	client, err := url.Parse(*clientURL)
	if err != nil {
		log.Fatalf("--listen-client-url: %v", err)
	}
	peer, err := url.Parse(*peerURL)
	if err != nil {
		log.Fatalf("--listen-peer-url: %v", err)
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()

	server, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcd: %v", err)
	}
	<-server.Server.ReadyNotify()
	log.Printf("etcd ready on %s", client)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-stop:
	case err := <-server.Err():
		log.Printf("etcd: %v", err)
	}
	server.Close()
}
