package redis

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hashTag returns what Redis Cluster hashes for key: the substring between
// the first '{' and the first '}' after it when that is non-empty, else
// the whole key.
func hashTag(key string) string {
	s := strings.IndexByte(key, '{')
	if s < 0 {
		return key
	}
	e := strings.IndexByte(key[s+1:], '}')
	if e <= 0 {
		return key
	}
	return key[s+1 : s+1+e]
}

// sessionKeys returns every key of native session id, in KeyKind order:
// the items list, the metadata hash, the checkpoint hash.
func sessionKeys(prefix, id string) []string {
	return append(nativeKeys(prefix, id), nativeCheckpointKey(prefix, id))
}

var hostileIDs = []string{
	"a", "a:", "a:items", "a:meta", "a*", "a}", "{a}", "a}:{x", "{", "}", "{}", "}{", "%", "%7B", "%7b", "a%2A",
	"'", `"`, "$where:a", "a\x00", "\x00", "a\x00x", "/../x", `\`, strings.Repeat("L", 4096),
	"ünïcødé-☃-😀", " ", "\n", "*", "a[0]", "a.$", "\xff\xfe", ":{a}:items", "x}:items",
}

func TestEscapeID(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"plain-id_1.2", "plain-id_1.2"},
		{"a:b", "a%3Ab"},
		{"{a}", "%7Ba%7D"},
		{"100%", "100%25"},
		{"%7B", "%257B"},
		{"a\x00b*", "a\x00b*"},
		{"ünï", "ünï"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			got := escapeID(tc.id)
			require.Equal(t, tc.want, got)
			back, ok := unescapeID(got)
			require.True(t, ok)
			require.Equal(t, tc.id, back)
		})
	}
}

func TestNativeKeysConfineHostileIDs(t *testing.T) {
	tags := map[string]string{}
	keys := map[string]string{}
	for _, id := range hostileIDs {
		ks := sessionKeys(DefaultKeyPrefix, id)
		require.Len(t, ks, 3)
		tag := hashTag(ks[0])
		require.Equal(t, tag, hashTag(ks[1]), "the keys of %q share one hash tag", id)
		require.Equal(t, tag, hashTag(ks[2]), "the checkpoint hash of %q shares the session's hash tag", id)
		require.Equal(t, escapeID(id), tag, "the tag of %q is its escaped id", id)
		require.NotContains(t, tag, "{")
		require.NotContains(t, tag, "}")
		if other, dup := tags[tag]; dup {
			t.Fatalf("ids %q and %q share the tag %q", other, id, tag)
		}
		tags[tag] = id
		for i, k := range ks {
			if other, dup := keys[k]; dup {
				t.Fatalf("ids %q and %q share the key %q", other, id, k)
			}
			keys[k] = id
			gotID, kind, ok := ParseKey("", k)
			require.True(t, ok, k)
			require.Equal(t, id, gotID)
			require.Equal(t, KeyKind(i+1), kind)
		}
	}
}

// TestNativeKeysOneSlot asks the cluster itself: every key of every
// hostile id (the checkpoint hash's too) hashes to one slot.
func TestNativeKeysOneSlot(t *testing.T) {
	ctx := context.Background()
	c := clusterClient(t)
	for _, id := range hostileIDs {
		ks := sessionKeys("agents:session", id)
		a, err := c.ClusterKeySlot(ctx, ks[0]).Result()
		require.NoError(t, err)
		for _, k := range ks[1:] {
			b, err := c.ClusterKeySlot(ctx, k).Result()
			require.NoError(t, err)
			require.Equal(t, a, b, "id %q, key %q", id, k)
		}
	}
}

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		prefix, key string
		id          string
		kind        KeyKind
		ok          bool
	}{
		{"", "agents:native:{abc}:items", "abc", KeyItems, true},
		{"", "agents:native:{a%3Ab}:meta", "a:b", KeyMeta, true},
		{"p", "p:{%7Bx%7D}:items", "{x}", KeyItems, true},
		{"", "agents:native:{a%3Ab}:checkpoints", "a:b", KeyCheckpoints, true},
		{"", "agents:native:{abc}:checkpoint", "", 0, false},
		{"", "agents:native:abc:checkpoints", "", 0, false}, // the Python layout's
		{"", "agents:native:{abc}:other", "", 0, false},
		{"", "agents:native:{}:items", "", 0, false},
		{"", "agents:native:{a:b}:items", "", 0, false},       // a raw ':' is never produced
		{"", "agents:native:{a%3ab}:items", "", 0, false},     // lower-case hex is never produced
		{"", "agents:native:{a%41b}:items", "", 0, false},     // only escaped bytes are escaped
		{"", "agents:native:{a%3}:items", "", 0, false},       // truncated escape
		{"", "other:{abc}:items", "", 0, false},               // another prefix
		{"", "agents:native:abc:messages", "", 0, false},      // the Python layout
		{"", "agents:native:{abc}:items:x", "", 0, false},     // trailing junk
		{"", "agents:native:{abc:items", "", 0, false},        // no closing brace
		{"agents", "agents:native:{abc}:items", "", 0, false}, // prefix must match exactly
		{"", "agents:session:{abc}:items", "", 0, false},      // the old native default is not the default
		{"agents:session", "agents:session:{abc}:items", "abc", KeyItems, true},
	} {
		t.Run(tc.key, func(t *testing.T) {
			id, kind, ok := ParseKey(tc.prefix, tc.key)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.id, id)
			assert.Equal(t, tc.kind, kind)
		})
	}
}
