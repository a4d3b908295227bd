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
