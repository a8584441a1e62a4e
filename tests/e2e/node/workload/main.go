// The workload image's program: prints the device environment it was given (and writes it as
// its termination message), then runs until SIGTERM, taking STOP_DELAY_S seconds to stop.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	var lines []string
	for _, entry := range os.Environ() {
		if strings.HasPrefix(entry, "NVIDIA_") || strings.HasPrefix(entry, "DRA_BRIDGE_") {
			lines = append(lines, entry)
		}
	}
	sort.Strings(lines)
	report := strings.Join(append([]string{"workload: started"}, lines...), "\n")
	fmt.Println(report)
	_ = os.WriteFile("/dev/termination-log", []byte(report), 0o644)
	if os.Getenv("EXIT_AT_ONCE") != "" {
		return
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	delay, _ := strconv.Atoi(os.Getenv("STOP_DELAY_S"))
	time.Sleep(time.Duration(delay) * time.Second)
}
