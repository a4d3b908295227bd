package pyjson

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// digestFixtures is the shared golden file of SDK item digests, relative to
// this package's directory (/work/main's parent holds shared/).
const digestFixtures = "../../../shared/fixtures/digests.json"

// sdkMetadataKeys are the keys the Python SDK strips before hashing an item.
var sdkMetadataKeys = []string{"_agents_tool_description", "_agents_tool_title"}

func TestSDKDigestFixtures(t *testing.T) {
	data, err := os.ReadFile(digestFixtures)
	require.NoError(t, err, "the digest fixtures must be present")
	var file struct {
		Vectors []struct {
			ItemJSON    string `json:"item_json"`
			IgnoreIDs   bool   `json:"ignore_ids"`
			Fingerprint string `json:"fingerprint"`
			SHA256      string `json:"sha256"`
		} `json:"vectors"`
	}
	require.NoError(t, json.Unmarshal(data, &file))
	require.NotEmpty(t, file.Vectors)
	for _, v := range file.Vectors {
		t.Run(v.ItemJSON, func(t *testing.T) {
			drop := append([]string(nil), sdkMetadataKeys...)
			if v.IgnoreIDs {
				drop = append(drop, "id")
			}
			out, err := Dumps([]byte(v.ItemJSON), Options{SortKeys: true, EnsureASCII: true, DropTopLevel: drop})
			require.NoError(t, err)
			assert.Equal(t, v.Fingerprint, string(out))
			sum := sha256.Sum256(out)
			assert.Equal(t, v.SHA256, hex.EncodeToString(sum[:]))
		})
	}
}
