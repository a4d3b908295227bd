package openaigo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/session"
)

// A conversation kept by the Conversations API: the session creates it on
// the first write and reports its id, which a later process reopens. Here
// a fake of the API stands in for api.openai.com; in real use the client
// is openai.NewClient() (OPENAI_API_KEY) and the id is stored with the
// user's account.
func ExampleConversationsSession() {
	ctx := context.Background()
	mux := http.NewServeMux()
	conv := newFakeConvHandler(nil)
	mux.HandleFunc("/v1/conversations/", conv.serve)
	mux.HandleFunc("/v1/conversations", conv.serve)
	mux.HandleFunc("/v1/responses", func(w http.ResponseWriter, r *http.Request) {
		writeResponse(w, "resp_1", [][]byte{[]byte(`{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":"18°C, clear."}],"role":"assistant"}`)})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("test"))

	var saved string // the conversation id, kept with the user's account
	s := openaigo.NewConversationsSession(&client, openaigo.ConversationsOptions{
		OnNewConversation: func(id string) { saved = id },
	})
	h := openaigo.New(s, openaigo.Options{Window: 50})
	if err := h.AddJSON(ctx, json.RawMessage(`{"role":"user","content":"Weather in Paris?"}`)); err != nil {
		panic(err)
	}
	params, err := h.Params(ctx, responses.ResponseNewParams{Model: "gpt-5"})
	if err != nil {
		panic(err)
	}
	resp, err := client.Responses.New(ctx, params)
	if err != nil {
		panic(err)
	}
	if err := h.AddResponse(ctx, resp); err != nil {
		panic(err)
	}
	fmt.Println("created:", saved == s.SessionID() && saved != "")

	// Another process, later: the same conversation by its id.
	again := openaigo.NewConversationsSession(&client, openaigo.ConversationsOptions{ConversationID: saved})
	items, err := session.All(ctx, again)
	if err != nil {
		panic(err)
	}
	for _, it := range items {
		id, _ := it.StringField("id")
		fmt.Printf("%s: id given by the API: %t\n", it.Role(), id != "" && id != "msg_1")
	}
	// Output:
	// created: true
	// user: id given by the API: true
	// assistant: id given by the API: true
}
