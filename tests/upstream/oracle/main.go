// Command oracle answers DRA questions with upstream Kubernetes code, for dra-bridge's tests.
//
// It reads one JSON request per line on stdin and writes one JSON answer per line on stdout:
//
//	{"op": "cel", "expression": "...", "device": {...}, "envType": "new"|"stored", "features": {...}}
//	  -> {"compileError", "cost", "match", "matchError"}: k8s.io/dynamic-resource-allocation/cel
//	{"op": "allocate", "slices": [...], "classes": [...], "allocatedClaims": [...], "nodes": [...],
//	 "claims": [...], "features": {...}}
//	  -> {"nodes": [{"node", "allocations" (one per claim, null when not allocatable there), "error"}]}:
//	  the structured allocator, once per node, as the scheduler's DRA plugin calls it.
//
// Feature sets default to what the release it is built for enables by default (features_*.go,
// chosen by a build tag: k134, k135, k136; none: 1.37). Nothing here is our own DRA logic: the
// program only decodes JSON into upstream types and calls upstream functions.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type celFeatures struct {
	ConsumableCapacity *bool `json:"consumableCapacity"`
	ListTypeAttributes *bool `json:"listTypeAttributes"`
}

type celDevice struct {
	Driver                   string                                                    `json:"driver"`
	AllowMultipleAllocations *bool                                                     `json:"allowMultipleAllocations"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity"`
}

type request struct {
	Op string `json:"op"`

	// cel
	Expression  string       `json:"expression"`
	EnvType     string       `json:"envType"`
	CELFeatures *celFeatures `json:"celFeatures"`
	Device      *celDevice   `json:"device"`

	// allocate
	Features        *structured.Features         `json:"features"`
	Slices          []*resourceapi.ResourceSlice `json:"slices"`
	Classes         []*resourceapi.DeviceClass   `json:"classes"`
	AllocatedClaims []*resourceapi.ResourceClaim `json:"allocatedClaims"`
	// AllocatedDevices are dedicated allocations without a claim, as upstream's tables give them.
	AllocatedDevices []deviceID                   `json:"allocatedDevices"`
	Nodes            []*v1.Node                   `json:"nodes"`
	Claims           []*resourceapi.ResourceClaim `json:"claims"`
}

type deviceID struct {
	Driver string `json:"driver"`
	Pool   string `json:"pool"`
	Device string `json:"device"`
}

type celAnswer struct {
	// ValidationError is what the API server says when a claim with this selector is created:
	// too long, a compile error, or too expensive (pkg/apis/resource/validation validateCELExpression).
	ValidationError *string `json:"validationError"`
	CompileError    *string `json:"compileError"`
	Cost            *uint64 `json:"cost"`
	Match           *bool   `json:"match"`
	MatchError      *string `json:"matchError"`
}

type nodeAnswer struct {
	Node        string                         `json:"node"`
	Allocations []resourceapi.AllocationResult `json:"allocations"`
	Error       *string                        `json:"error"`
	// NodeOnly: the error is ErrFailedAllocationOnNode's (the scheduler marks this node
	// unschedulable and tries the others) rather than one that aborts the scheduling cycle.
	NodeOnly bool `json:"nodeOnly"`
}

type allocateAnswer struct {
	Nodes []nodeAnswer `json:"nodes"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 256<<20)
	out := bufio.NewWriter(os.Stdout)
	encoder := json.NewEncoder(out)
	for in.Scan() {
		var req request
		var answer any
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			answer = map[string]string{"inputError": err.Error()}
		} else {
			switch req.Op {
			case "cel":
				answer = evaluateCEL(req)
			case "allocate":
				answer = allocate(req)
			default:
				answer = map[string]string{"inputError": fmt.Sprintf("unknown op %q", req.Op)}
			}
		}
		if err := encoder.Encode(answer); err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			os.Exit(1)
		}
		out.Flush() // the caller may wait for each answer before sending the next request
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		os.Exit(1)
	}
}

func text(s string) *string { return &s }

// celFeaturesOf: the release's CEL environment, with what a request turns on or off.
func celFeaturesOf(asked *celFeatures) cel.Features {
	features := cel.Features{EnableConsumableCapacity: defaultAllocatorFeatures.ConsumableCapacity}
	if asked != nil && asked.ConsumableCapacity != nil {
		features.EnableConsumableCapacity = *asked.ConsumableCapacity
	}
	if asked != nil && asked.ListTypeAttributes != nil {
		setListTypeAttributes(&features, *asked.ListTypeAttributes)
	}
	return features
}

func evaluateCEL(req request) celAnswer {
	features := celFeaturesOf(req.CELFeatures)
	envType := environment.NewExpressions // what the API server checks when a claim is created
	if req.EnvType == "stored" {
		envType = environment.StoredExpressions
	}
	var answer celAnswer
	if len(req.Expression) > resourceapi.CELSelectorExpressionMaxLength {
		answer.ValidationError = text(fmt.Sprintf("Too long: may not be more than %d bytes", resourceapi.CELSelectorExpressionMaxLength))
		return answer
	}
	result := cel.GetCompiler(features).CompileCELExpression(req.Expression, cel.Options{EnvType: &envType})
	if result.Error != nil {
		answer.CompileError = text(result.Error.Error())
		answer.ValidationError = answer.CompileError
		return answer
	}
	cost := result.MaxCost
	answer.Cost = &cost
	if cost > resourceapi.CELSelectorExpressionMaxCost {
		answer.ValidationError = text("Forbidden: too complex, exceeds cost limit")
	}
	if req.Device == nil {
		return answer
	}
	match, _, err := result.DeviceMatches(context.Background(), cel.Device{
		Driver:                   req.Device.Driver,
		AllowMultipleAllocations: req.Device.AllowMultipleAllocations,
		Attributes:               req.Device.Attributes,
		Capacity:                 req.Device.Capacity,
	})
	if err != nil {
		answer.MatchError = text(err.Error())
	} else {
		answer.Match = &match
	}
	return answer
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, class := range l {
		out = append(out, class)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	class, ok := l[name]
	if !ok {
		return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
	}
	return class, nil
}

// allocatedState is what the scheduler's DRA plugin derives from allocated claims: dedicated
// devices, shared devices by share ID and their consumed capacity; admin access allocates nothing.
func allocatedState(claims []*resourceapi.ResourceClaim, consumable bool) structured.AllocatedState {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			if result.AdminAccess != nil && *result.AdminAccess {
				continue
			}
			id := structured.MakeDeviceID(result.Driver, result.Pool, result.Device)
			if consumable && result.ShareID != nil {
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, result.ShareID))
				if result.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, result.ConsumedCapacity))
				}
				continue
			}
			state.AllocatedDevices.Insert(id)
		}
	}
	return state
}

// defaultClaim applies the API server's defaults (pkg/apis/resource/v1 defaulting): claims in the
// tests are written as users write them, the allocator sees them as the API server stores them.
func defaultClaim(claim *resourceapi.ResourceClaim) {
	defaultTolerations := func(tolerations []resourceapi.DeviceToleration) {
		for i := range tolerations {
			if tolerations[i].Operator == "" {
				tolerations[i].Operator = resourceapi.DeviceTolerationOpEqual
			}
		}
	}
	for i := range claim.Spec.Devices.Requests {
		request := &claim.Spec.Devices.Requests[i]
		if exact := request.Exactly; exact != nil {
			if exact.AllocationMode == "" {
				exact.AllocationMode = resourceapi.DeviceAllocationModeExactCount
			}
			if exact.AllocationMode == resourceapi.DeviceAllocationModeExactCount && exact.Count == 0 {
				exact.Count = 1
			}
			defaultTolerations(exact.Tolerations)
		}
		for j := range request.FirstAvailable {
			sub := &request.FirstAvailable[j]
			if sub.AllocationMode == "" {
				sub.AllocationMode = resourceapi.DeviceAllocationModeExactCount
			}
			if sub.AllocationMode == resourceapi.DeviceAllocationModeExactCount && sub.Count == 0 {
				sub.Count = 1
			}
			defaultTolerations(sub.Tolerations)
		}
	}
}

func allocate(req request) any {
	for _, claim := range req.Claims {
		defaultClaim(claim)
	}
	features := defaultAllocatorFeatures
	if req.Features != nil {
		features = *req.Features
	}
	classes := classLister{}
	for _, class := range req.Classes {
		classes[class.Name] = class
	}
	ctx := context.Background()
	celCache := cel.NewCache(1000, cacheFeatures(features))
	state := allocatedState(req.AllocatedClaims, features.ConsumableCapacity)
	for _, id := range req.AllocatedDevices {
		state.AllocatedDevices.Insert(structured.MakeDeviceID(id.Driver, id.Pool, id.Device))
	}
	allocator, err := structured.NewAllocator(ctx, features, state, classes, req.Slices, celCache)
	if err != nil {
		return map[string]string{"inputError": err.Error()}
	}
	answer := allocateAnswer{Nodes: []nodeAnswer{}}
	for _, node := range req.Nodes {
		results, err := allocator.Allocate(ctx, node, req.Claims)
		entry := nodeAnswer{Node: node.Name, Allocations: results}
		if err != nil {
			entry.Error = text(err.Error())
			entry.NodeOnly = failedOnNodeOnly(err)
			entry.Allocations = nil
		}
		answer.Nodes = append(answer.Nodes, entry)
	}
	return answer
}
