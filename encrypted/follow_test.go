package encrypted_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/encrypted"
	"github.com/agentsessions/sessions/session"
)

func TestFollowingDecryptsAndAppendOnceEncrypts(t *testing.T) {
	ctx := context.Background()
	inner := newMem(t, "follow")
	s, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{Secret: "k"}}})
	require.NoError(t, err)
	want := items(t, `{"role":"user","content":"secret one"}`, `{"role":"user","content":"secret two"}`)

	appended, err := session.AppendOnce(ctx, s, "op", want[:1])
	require.NoError(t, err)
	require.True(t, appended)
	appended, err = session.AppendOnce(ctx, s, "op", want[:1])
	require.NoError(t, err)
	require.False(t, appended, "the operation id reaches the inner session")

	got, c, err := session.ReadSince(ctx, s, "")
	require.NoError(t, err)
	require.Equal(t, want[0].String(), got[0].String())
	require.NoError(t, s.AddItems(ctx, want[1:]))
	got, _, err = session.ReadSince(ctx, s, c)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, want[1].String(), got[0].String(), "what is new, decrypted")

	stored, _, err := inner.ItemsSince(ctx, "")
	require.NoError(t, err)
	require.Len(t, stored, 2)
	for _, it := range stored {
		require.True(t, it.HasField("payload"), "the inner session stores envelopes: %s", it)
		require.NotContains(t, it.String(), "secret")
	}
}

func TestFollowingFailsOnWhatItCannotDecrypt(t *testing.T) {
	ctx := context.Background()
	inner := newMem(t, "follow-bad")
	s, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{Secret: "k"}}})
	require.NoError(t, err)
	other, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{Secret: "another key"}}})
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, items(t, `{"n":1}`)))
	_, c, err := session.ReadSince(ctx, s, "")
	require.NoError(t, err)
	require.NoError(t, other.AddItems(ctx, items(t, `{"n":2}`)))
	got, next, err := session.ReadSince(ctx, s, c)
	var de *encrypted.DecryptError
	require.ErrorAs(t, err, &de)
	require.Empty(t, got)
	require.Equal(t, c, next, "the cursor does not pass an item that was not read")
}
