package main

// A node's GPUs, read from the description the reporter's `fake:` backend takes
// (app/data/fake/*.yaml): one file drives both.

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

type migDevice struct {
	UUID            string  `yaml:"uuid"`
	Profile         string  `yaml:"profile"`
	MemoryMiB       uint64  `yaml:"memoryMiB"`
	Multiprocessors uint32  `yaml:"multiprocessors"`
	PlacementStart  uint32  `yaml:"placementStart"`
	PlacementSize   *uint32 `yaml:"placementSize"`
	CopyEngines     uint32  `yaml:"copyEngines"`
	Decoders        uint32  `yaml:"decoders"`
	Encoders        uint32  `yaml:"encoders"`
	JpegEngines     uint32  `yaml:"jpegEngines"`
	OfaEngines      uint32  `yaml:"ofaEngines"`
	GIProfileID     *uint32 `yaml:"giProfileId"`
}

type migProfile struct {
	Profile         string      `yaml:"profile"`
	GIProfileID     uint32      `yaml:"giProfileId"`
	MemoryMiB       uint64      `yaml:"memoryMiB"`
	Multiprocessors uint32      `yaml:"multiprocessors"`
	CopyEngines     uint32      `yaml:"copyEngines"`
	Decoders        uint32      `yaml:"decoders"`
	Encoders        uint32      `yaml:"encoders"`
	JpegEngines     uint32      `yaml:"jpegEngines"`
	OfaEngines      uint32      `yaml:"ofaEngines"`
	Placements      [][2]uint32 `yaml:"placements"`
}

type gpu struct {
	Index             uint32       `yaml:"index"`
	Minor             *uint32      `yaml:"minor"`
	UUID              string       `yaml:"uuid"`
	ProductName       string       `yaml:"productName"`
	Brand             string       `yaml:"brand"`
	Architecture      string       `yaml:"architecture"`
	ComputeCapability string       `yaml:"computeCapability"`
	MemoryMiB         uint64       `yaml:"memoryMiB"`
	Multiprocessors   uint32       `yaml:"multiprocessors"`
	PciBusID          string       `yaml:"pciBusID"`
	PcieRoot          string       `yaml:"pcieRoot"` // sysfs's, not NVML's: not served
	NumaNode          *int32       `yaml:"numaNode"`
	MigEnabled        *bool        `yaml:"migEnabled"`
	MigDevices        []migDevice  `yaml:"migDevices"`
	MigProfiles       []migProfile `yaml:"migProfiles"`
	NvlinkPeers       []string     `yaml:"nvlinkPeers"`
	Healthy           *bool        `yaml:"healthy"`
	Xid               *uint64      `yaml:"xid"`
	AddressingMode    string       `yaml:"addressingMode"`
	FabricClique      string       `yaml:"fabricClique"`
}

type node struct {
	DriverVersion     string `yaml:"driverVersion"`
	CudaDriverVersion string `yaml:"cudaDriverVersion"`
	GPUs              []gpu  `yaml:"gpus"`
}

// DescriptionEnv names the description file; without it the library has no driver to talk to.
const DescriptionEnv = "DRA_BRIDGE_NVML_DESCRIPTION"

var profileName = regexp.MustCompile(`^(?:(\d+)c\.)?(\d+)g\.(\d+)gb([+-][a-z.]+)?$`)

// NVML's GPU instance profile ids by (slices, attribute) (NVML_GPU_INSTANCE_PROFILE_*).
var giProfileIDs = map[string]uint32{
	"1": 0, "2": 1, "3": 2, "4": 3, "7": 4, "8": 5, "6": 6, "1+me": 7, "2+me": 8, "1+gfx": 10, "2+gfx": 11,
	"4+gfx": 12, "1-me": 13, "2-me": 14, "1+me.all": 15, "2+me.all": 16,
}

// slices: a profile name's GPU instance slices, compute instance slices and GI profile id.
func slices(profile string) (gi, ci, id uint32, err error) {
	m := profileName.FindStringSubmatch(profile)
	if m == nil {
		return 0, 0, 0, fmt.Errorf("profile %q is not <g>g.<GB>gb", profile)
	}
	g, _ := strconv.Atoi(m[2])
	c := g
	if m[1] != "" {
		c, _ = strconv.Atoi(m[1])
	}
	known, ok := giProfileIDs[m[2]+m[4]]
	if !ok {
		return 0, 0, 0, fmt.Errorf("profile %q has no NVML GPU instance profile", profile)
	}
	return uint32(g), uint32(c), known, nil
}

func readNode(path string) (*node, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var n node
	decoder := yaml.NewDecoder(strings.NewReader(string(data)))
	decoder.KnownFields(true)
	if err := decoder.Decode(&n); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if g.Healthy != nil && !*g.Healthy && g.Xid == nil {
			return nil, fmt.Errorf("%s: gpus[%d]: healthy false needs xid (NVML says it by an XID event)", path, i)
		}
		for j, m := range g.MigDevices {
			if _, _, _, err := slices(m.Profile); err != nil {
				return nil, fmt.Errorf("%s: gpus[%d].migDevices[%d]: %v", path, i, j, err)
			}
		}
	}
	return &n, nil
}

func (g *gpu) migEnabled() bool {
	if g.MigEnabled != nil {
		return *g.MigEnabled
	}
	return len(g.MigDevices) > 0
}

func (g *gpu) minor() uint32 {
	if g.Minor != nil {
		return *g.Minor
	}
	return g.Index
}

// reportedXid: the XID NVML reports for it (0: none). The reporter decides what it means: an
// application's XID (13, 31, ...) leaves the GPU healthy, any other marks it unhealthy.
func (g *gpu) reportedXid() uint64 {
	if g.Xid != nil {
		return *g.Xid
	}
	return 0
}

func (m *migDevice) giProfileID() uint32 {
	if m.GIProfileID != nil {
		return *m.GIProfileID
	}
	_, _, id, _ := slices(m.Profile)
	return id
}

func (m *migDevice) placementSize() uint32 {
	if m.PlacementSize != nil {
		return *m.PlacementSize
	}
	return 1
}
