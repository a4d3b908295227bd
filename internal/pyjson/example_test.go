package pyjson_test

import (
	"crypto/sha256"
	"fmt"

	"github.com/agentsessions/sessions/internal/pyjson"
)

// The SDK's item digest: json.dumps(item, sort_keys=True) without the SDK
// metadata keys, hashed with SHA-256.
func ExampleDumps() {
	item := []byte(`{"role":"user","content":"café","_agents_tool_title":"T"}`)
	fp, err := pyjson.Dumps(item, pyjson.Options{
		SortKeys:     true,
		EnsureASCII:  true,
		DropTopLevel: []string{"_agents_tool_description", "_agents_tool_title"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(fp))
	fmt.Printf("%x\n", sha256.Sum256(fp))
	// Output:
	// {"content": "caf\u00e9", "role": "user"}
	// 82a1dec1bb9f94a1477802744333b3b05a23a8eab984a3b17079af99886a6126
}
