package openaigo_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/session"
)

// FuzzDecodeItemPage: a list page of the Conversations API, whatever its
// bytes, is decoded into items that are each a JSON object the page held,
// byte for byte, or refused with an error; it never panics.
func FuzzDecodeItemPage(f *testing.F) {
	for _, s := range []string{
		`{"object":"list","data":[],"first_id":"","last_id":"","has_more":false}`,
		`{"object":"list","data":[{"id":"msg_1","type":"message","role":"user","content":"hi"}],"first_id":"msg_1","last_id":"msg_1","has_more":true}`,
		`{"data":[{"id":"rs_1","type":"reasoning","summary":[],"encrypted_content":"gAAA"},{ "id" : "fc_1" , "n" : 12345678901234567890 }],"has_more":false}`,
		`{"data":[1],"has_more":false}`,
		`{"data":[null],"has_more":false}`,
		`{"data":null,"has_more":false}`,
		`{"data":[],"has_more":"yes"}`,
		`{"data":[]}`,
		`{"data":[{}],"has_more":false} {}`,
		`{"data":[{"role":"user","content":"raw \u2028 \ud800"}],"has_more":false,"first_id":null}`,
		`[]`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		page, err := openaigo.DecodeItemPage(body)
		if err != nil {
			return
		}
		var raw struct {
			Data []json.RawMessage `json:"data"`
		}
		require.NoError(t, json.Unmarshal(body, &raw), "a page decoded is JSON")
		require.Len(t, page.Items, len(raw.Data))
		for i, it := range page.Items {
			require.True(t, it.Valid())
			require.True(t, bytes.Equal(bytes.TrimSpace(raw.Data[i]), it.Bytes()) || json.Valid(it.Bytes()), "item %d", i)
			if _, err := session.NewItem(it.Bytes()); err != nil {
				t.Fatalf("item %d is not an item: %v", i, err)
			}
		}
	})
}

// TestDecodeItemPageErrors: what the decoder refuses, and why.
func TestDecodeItemPageErrors(t *testing.T) {
	for body, want := range map[string]error{
		`{"data":[1],"has_more":false}`:    session.ErrInvalidItem,
		`{"data":[null],"has_more":false}`: session.ErrInvalidItem,
	} {
		_, err := openaigo.DecodeItemPage([]byte(body))
		require.True(t, errors.Is(err, want), "%s: %v", body, err)
	}
	for _, body := range []string{`{"data":null,"has_more":false}`, `{"data":[]}`, `[]`, ``, `{"data":[],"has_more":false} {}`} {
		_, err := openaigo.DecodeItemPage([]byte(body))
		require.Error(t, err, body)
	}
	page, err := openaigo.DecodeItemPage([]byte(`{"object":"list","data":[{ "id" : "a" }],"first_id":"a","last_id":"a","has_more":true}`))
	require.NoError(t, err)
	require.Equal(t, `{ "id" : "a" }`, string(page.Items[0].Bytes()))
	require.Equal(t, openaigo.ItemPage{Items: page.Items, FirstID: "a", LastID: "a", HasMore: true}, page)
}
