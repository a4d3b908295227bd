package history_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

func TestDigestsMatchPythonGoldenVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "digests.json"))
	require.NoError(t, err)
	var doc struct {
		Vectors []struct {
			ItemJSON    string `json:"item_json"`
			IgnoreIDs   bool   `json:"ignore_ids"`
			Fingerprint string `json:"fingerprint"`
			SHA256      string `json:"sha256"`
		} `json:"vectors"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.NotEmpty(t, doc.Vectors)
	for _, v := range doc.Vectors {
		it, err := session.ParseItem(v.ItemJSON)
		require.NoError(t, err)
		fp, err := history.Fingerprint(it, v.IgnoreIDs)
		require.NoError(t, err)
		require.Equal(t, v.Fingerprint, fp, v.ItemJSON)
		d, err := history.Digest(it, v.IgnoreIDs)
		require.NoError(t, err)
		require.Equal(t, v.SHA256, d, v.ItemJSON)
	}
	t.Logf("%d golden vectors match", len(doc.Vectors))
}

// TestDigestNonFiniteTokens: a record Python wrote with float('nan') or
// float('-inf') digests as Python digests it (the vectors are in
// testdata/digests.json too, computed with CPython).
func TestDigestNonFiniteTokens(t *testing.T) {
	for in, want := range map[string][2]string{
		`{"x": NaN}`:       {`{"x": NaN}`, "baab068bbf85ddffee705062ebcac22b5b8e58b7634a5fc48ac941d3968349c2"},
		`{"y": -Infinity}`: {`{"y": -Infinity}`, "918e86cab8a13e4c404eb9e03e8a25fea4e7d2f9dc9c69ccc32ccd3d47145674"},
	} {
		it, err := session.ParseItem(in)
		require.NoError(t, err)
		fp, err := history.Fingerprint(it, false)
		require.NoError(t, err)
		require.Equal(t, want[0], fp)
		d, err := history.Digest(it, false)
		require.NoError(t, err)
		require.Equal(t, want[1], d)
		require.Equal(t, in, it.String(), "the bytes are kept exactly")
	}
}
