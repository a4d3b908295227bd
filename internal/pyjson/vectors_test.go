package pyjson

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vector is one case written by testdata/gen_vectors.py with CPython 3.11.
type vector struct {
	Name        string   `json:"name"`
	Input       *string  `json:"input"`
	InputB64    string   `json:"input_b64"`
	SortKeys    bool     `json:"sort_keys"`
	EnsureASCII bool     `json:"ensure_ascii"`
	Compact     bool     `json:"compact"`
	Drop        []string `json:"drop"`
	Output      *string  `json:"output"`
	Error       string   `json:"error"`
	Deviation   string   `json:"deviation"`
}

func (v vector) raw(t *testing.T) []byte {
	if v.Input != nil {
		return []byte(*v.Input)
	}
	b, err := base64.StdEncoding.DecodeString(v.InputB64)
	require.NoError(t, err)
	return b
}

func loadVectors(t *testing.T) []vector {
	data, err := os.ReadFile("testdata/vectors.json")
	require.NoError(t, err)
	var file struct {
		Python  string   `json:"python"`
		Count   int      `json:"count"`
		Vectors []vector `json:"vectors"`
	}
	require.NoError(t, json.Unmarshal(data, &file))
	require.Len(t, file.Vectors, file.Count)
	require.NotEmpty(t, file.Vectors)
	return file.Vectors
}

func TestCPythonVectors(t *testing.T) {
	for i, v := range loadVectors(t) {
		name := fmt.Sprintf("%03d %s sort=%t ascii=%t compact=%t", i, v.Name, v.SortKeys, v.EnsureASCII, v.Compact)
		t.Run(name, func(t *testing.T) {
			opts := Options{SortKeys: v.SortKeys, EnsureASCII: v.EnsureASCII, Compact: v.Compact, DropTopLevel: v.Drop}
			out, err := Dumps(v.raw(t), opts)
			if v.Error != "" {
				require.Error(t, err, "CPython: %s %s", v.Error, v.Deviation)
				assert.ErrorIs(t, err, ErrInvalidJSON)
				assert.Nil(t, out)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, v.Output)
			assert.Equal(t, *v.Output, string(out))
		})
	}
}
