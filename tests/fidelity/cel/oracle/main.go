// Command celoracle answers, for CEL expressions read as JSON lines on stdin, what one
// Kubernetes minor (the k8s.io/apiserver and cel-go its go.mod pins: 1.35, 1.36 or 1.37, see
// build.sh) makes of them: the compile-time verdict (type/overload errors, the estimated-cost
// limit) and the evaluated value with its CEL type, or the runtime error.
//
//	celoracle            cases on stdin, one answer per line on stdout (same order)
//	celoracle extract F  the expression literals of the Go test files F... (one JSON line each)
//
// A case is {"env": "library"|"device", "expr": "...", "device": {...}}. "library" is the
// API server's base environment for new expressions (environment.DefaultCompatibilityVersion,
// the previous minor; strict cost) with the Kubernetes libraries; "device" is the DRA device
// selector environment as the API server validates a new ResourceClaim and the scheduler
// evaluates it.
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	resourceapi "k8s.io/api/resource/v1"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

type deviceInput struct {
	Driver     string                                                    `json:"driver"`
	Attributes map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity"`
}

type request struct {
	Env    string       `json:"env"`
	Expr   string       `json:"expr"`
	Device *deviceInput `json:"device"`
}

type answer struct {
	CompileError string `json:"compile_error,omitempty"`
	OutputType   string `json:"output_type,omitempty"`
	MaxCost      uint64 `json:"max_cost,omitempty"`
	Error        string `json:"error,omitempty"`
	CostExceeded bool   `json:"cost_exceeded,omitempty"`
	Value        any    `json:"value,omitempty"`
	Type         string `json:"type,omitempty"`
}

var libraryEnv *cel.Env

func main() {
	if len(os.Args) > 1 && os.Args[1] == "extract" {
		extract(os.Args[2:])
		return
	}
	env, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).
		Env(environment.NewExpressions)
	if err != nil {
		panic(err)
	}
	libraryEnv = env
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	encoder := json.NewEncoder(out)
	encoder.SetEscapeHTML(false)
	for in.Scan() {
		var req request
		var ans answer
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			ans.CompileError = "bad request: " + err.Error()
		} else if req.Env == "device" {
			ans = evalDevice(req)
		} else {
			ans = evalLibrary(req.Expr)
		}
		if err := encoder.Encode(ans); err != nil {
			panic(err)
		}
		out.Flush()
	}
}

func evalLibrary(expr string) (ans answer) {
	defer recoverInto(&ans)
	ast, issues := libraryEnv.Compile(expr)
	if issues != nil && issues.Err() != nil {
		ans.CompileError = "compilation failed: " + issues.String()
		return ans
	}
	ans.OutputType = ast.OutputType().String()
	estimate, err := libraryEnv.EstimateCost(ast, &library.CostEstimator{})
	if err == nil {
		ans.MaxCost = estimate.Max
	}
	prog, err := libraryEnv.Program(ast,
		cel.CostLimit(celconfig.PerCallLimit),
		cel.InterruptCheckFrequency(celconfig.CheckFrequency))
	if err != nil {
		ans.CompileError = "program instantiation failed: " + err.Error()
		return ans
	}
	value, _, err := prog.ContextEval(context.Background(), map[string]any{})
	return withResult(ans, value, err)
}

func evalDevice(req request) (ans answer) {
	defer recoverInto(&ans)
	envType := environment.NewExpressions
	result := dracel.GetCompiler(dracel.Features{}).
		CompileCELExpression(req.Expr, dracel.Options{EnvType: &envType})
	if result.Error != nil {
		ans.CompileError = result.Error.Detail
		return ans
	}
	ans.OutputType = result.OutputType.String()
	ans.MaxCost = result.MaxCost
	if result.MaxCost > resourceapi.CELSelectorExpressionMaxCost {
		ans.CompileError = "too complex, exceeds cost limit"
		return ans
	}
	device := dracel.Device{}
	if req.Device != nil {
		device = dracel.Device{Driver: req.Device.Driver, Attributes: req.Device.Attributes,
			Capacity: req.Device.Capacity}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	matches, _, err := result.DeviceMatches(ctx, device)
	if err != nil {
		return withResult(ans, nil, err)
	}
	return withResult(ans, types.Bool(matches), nil)
}

func recoverInto(ans *answer) {
	if r := recover(); r != nil {
		ans.Error = fmt.Sprintf("panic: %v", r)
	}
}

func withResult(ans answer, value ref.Val, err error) answer {
	if err != nil {
		ans.Error = err.Error()
		ans.CostExceeded = isCostError(err.Error())
		return ans
	}
	if types.IsError(value) {
		ans.Error = fmt.Sprint(value)
		return ans
	}
	ans.Type = value.Type().TypeName()
	ans.Value = encode(value)
	return ans
}

func isCostError(text string) bool {
	return len(text) > 0 && (contains(text, "cost limit exceeded") || contains(text, "operation interrupted"))
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// encode turns a CEL value into tagged JSON: {"t": type name, "v": value}. Doubles are
// text (so NaN, infinities and -0 survive), maps are [key, value] pairs.
func encode(v ref.Val) map[string]any {
	name := v.Type().TypeName()
	switch value := v.(type) {
	case types.Bool:
		return tagged(name, bool(value))
	case types.Int:
		return tagged(name, strconv.FormatInt(int64(value), 10))
	case types.Uint:
		return tagged(name, strconv.FormatUint(uint64(value), 10))
	case types.Double:
		return tagged(name, strconv.FormatFloat(float64(value), 'g', -1, 64))
	case types.String:
		return tagged(name, string(value))
	case types.Bytes:
		return tagged(name, base64.StdEncoding.EncodeToString(value))
	case types.Null:
		return tagged(name, nil)
	case types.Duration:
		return tagged(name, strconv.FormatInt(int64(value.Duration), 10))
	case types.Timestamp:
		return tagged(name, value.Time.UTC().Format(time.RFC3339Nano))
	case *types.Optional:
		if !value.HasValue() {
			return tagged(name, nil)
		}
		return tagged(name, []any{encode(value.GetValue())})
	case ref.Type:
		return tagged("type", value.TypeName())
	case apiservercel.Quantity:
		return tagged(name, value.Quantity.String())
	case apiservercel.Semver:
		return tagged(name, value.Version.String())
	case apiservercel.URL:
		return tagged(name, value.URL.String())
	case apiservercel.IP:
		return tagged(name, value.Addr.String())
	case apiservercel.CIDR:
		return tagged(name, value.Prefix.String())
	case traits.Mapper:
		return tagged(name, mapPairs(value))
	case traits.Lister:
		items := []any{}
		for it := value.Iterator(); it.HasNext() == types.True; {
			items = append(items, encode(it.Next()))
		}
		return tagged(name, items)
	}
	return tagged(name, fmt.Sprint(v.Value()))
}

func mapPairs(m traits.Mapper) []any {
	pairs := []any{}
	for it := m.Iterator(); it.HasNext() == types.True; {
		key := it.Next()
		pairs = append(pairs, []any{encode(key), encode(m.Get(key))})
	}
	return pairs
}

func tagged(name string, value any) map[string]any {
	return map[string]any{"t": name, "v": value}
}
