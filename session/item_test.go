package session_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

func TestItemFields(t *testing.T) {
	it := session.MustItem(`{"Type":"upper","type":"function_call","call_id":"c","id":5,"call_id":"c2"}`)
	require.Equal(t, "function_call", it.Type(), "keys match exactly, not case-insensitively")
	require.Equal(t, "c2", it.CallID(), "the last duplicate wins, as in Python")
	require.Equal(t, "", it.ID(), "a non-string id is no id")
	require.False(t, it.HasField("missing"))
	var zero session.Item
	require.False(t, zero.Valid())
	_, err := zero.MarshalJSON()
	require.ErrorIs(t, err, session.ErrInvalidItem)
	b := []byte(`{"a":1}`)
	n, err := session.NewItem(b)
	require.NoError(t, err)
	b[2] = 'X'
	require.Equal(t, `{"a":1}`, n.String(), "NewItem copies")
}
