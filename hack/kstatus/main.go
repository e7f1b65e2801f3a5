// Command kstatus prints, for each Kubernetes object read from stdin (a JSON
// list, or a `kubectl get -o json` List), the status that kstatus computes
// (sigs.k8s.io/cli-utils/pkg/kstatus, the library Flux, `kubectl wait`-style
// tools and cli-utils' appliers use), and, given -argocd FILE, the health that
// the Argo CD health check (Lua) for its kind in FILE returns.
//
// The Lua runs in gopher-lua, the interpreter Argo CD itself embeds, with the
// object as the global `obj`, as Argo CD calls a health script. FILE is the
// argocd-cm data the chart ships (charts/sluiceway/argocd-health.yaml): keys
// `resource.customizations.health.<group>_<kind>`.
//
// Output: one JSON line per object:
// {"kind", "name", "kstatus": {"status", "message"}, "argocd": {"status", "message"} | null}.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"
)

const healthPrefix = "resource.customizations.health."

type health struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

type verdict struct {
	Kind    string  `json:"kind"`
	Name    string  `json:"name"`
	Kstatus health  `json:"kstatus"`
	ArgoCD  *health `json:"argocd"`
}

func main() {
	argocd := flag.String("argocd", "", "argocd-cm data (YAML) holding resource.customizations.health.* scripts")
	flag.Parse()
	scripts, err := loadScripts(*argocd)
	if err != nil {
		fail(err)
	}
	objects, err := readObjects(os.Stdin)
	if err != nil {
		fail(err)
	}
	out := json.NewEncoder(os.Stdout)
	for _, object := range objects {
		u := &unstructured.Unstructured{}
		// Through UnmarshalJSON, so integers are int64 as kstatus's accessors expect.
		if err := u.UnmarshalJSON(object); err != nil {
			fail(err)
		}
		result, err := status.Compute(u)
		if err != nil {
			fail(fmt.Errorf("%s/%s: %w", u.GetKind(), u.GetName(), err))
		}
		v := verdict{Kind: u.GetKind(), Name: u.GetName(), Kstatus: health{result.Status.String(), result.Message}}
		if script, ok := scripts[u.GroupVersionKind().Group+"_"+u.GetKind()]; ok {
			h, err := runHealth(script, u.Object)
			if err != nil {
				fail(fmt.Errorf("argocd health of %s/%s: %w", u.GetKind(), u.GetName(), err))
			}
			v.ArgoCD = &h
		}
		if err := out.Encode(v); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kstatus:", err)
	os.Exit(1)
}

// readObjects accepts a JSON list of objects or a List with `items`.
func readObjects(r io.Reader) ([]json.RawMessage, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var wrapped struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &wrapped); err != nil {
		return nil, fmt.Errorf("stdin is neither a JSON list nor a List: %w", err)
	}
	return wrapped.Items, nil
}

// loadScripts reads `data` of an argocd-cm ConfigMap (or the map itself):
// group_kind -> Lua source.
func loadScripts(path string) (map[string]string, error) {
	scripts := map[string]string{}
	if path == "" {
		return scripts, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if data, ok := doc["data"].(map[string]any); ok {
		doc = data
	}
	for key, value := range doc {
		source, ok := value.(string)
		if !strings.HasPrefix(key, healthPrefix) || !ok {
			continue
		}
		scripts[strings.TrimSuffix(strings.TrimPrefix(key, healthPrefix), ".health.lua")] = source
	}
	return scripts, nil
}

// runHealth runs a health script as Argo CD does: `obj` set, the script's
// return value a table with `status` and `message`.
func runHealth(source string, object map[string]any) (health, error) {
	state := lua.NewState(lua.Options{SkipOpenLibs: false})
	defer state.Close()
	state.SetGlobal("obj", toLua(state, object))
	if err := state.DoString(source); err != nil {
		return health{}, err
	}
	returned, ok := state.Get(-1).(*lua.LTable)
	if !ok {
		return health{}, fmt.Errorf("the script returned %s, not a table", state.Get(-1).Type())
	}
	h := health{Status: lua.LVAsString(returned.RawGetString("status")), Message: lua.LVAsString(returned.RawGetString("message"))}
	switch h.Status {
	case "Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown":
		return h, nil
	}
	return health{}, fmt.Errorf("status %q is not one of Argo CD's health statuses", h.Status)
}

// toLua converts decoded JSON to Lua values the way Argo CD does: objects and
// arrays to tables (arrays 1-based), null to nil.
func toLua(state *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		table := state.NewTable()
		for _, item := range v {
			table.Append(toLua(state, item))
		}
		return table
	case map[string]any:
		table := state.NewTable()
		for key, item := range v {
			table.RawSetString(key, toLua(state, item))
		}
		return table
	}
	return lua.LString(fmt.Sprint(value))
}
