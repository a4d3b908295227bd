package openaigo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

// Everything is the window that holds the whole history (history.All):
// Options.Window's zero value means it too.
const Everything = history.All

// ErrNoRawJSON reports an output item that was not decoded from an API
// response (a responses.ResponseOutputItemUnion built in Go has no raw
// JSON): its typed fields are not a faithful copy of what the API sent, so
// it is refused rather than re-encoded.
var ErrNoRawJSON = errors.New("openaigo: output item has no raw JSON (it was not decoded from a response)")

// Options configure a History.
type Options struct {
	// Window is how many of the newest stored items Input reads before
	// history.ModelInput makes the window safe to send (n of ModelInput);
	// 0 or Everything means every item.
	Window int
}

// History is a conversation's Responses-API history kept in a
// session.Session: what the caller sends (AddInput, AddJSON) and what the
// API answers (AddResponse) are appended as their JSON bytes, and the next
// request's input is built from those bytes (Input, Params). Any session
// works: every adapter, and the encrypted and otelsession wrappers.
//
// A History holds no state of its own besides its options; two Histories
// over one session see the same items, and a process that reopens the
// store carries on where the last one stopped.
type History struct {
	s      session.Session
	window int
}

// New returns the History kept in s.
func New(s session.Session, opts Options) *History {
	w := opts.Window
	if w <= 0 {
		w = Everything
	}
	return &History{s: s, window: w}
}

// Session returns the session the history is kept in.
func (h *History) Session() session.Session { return h.s }

// Window returns the window Input reads.
func (h *History) Window() int { return h.window }

// AddInput appends request input items as one batch, each as the JSON
// openai-go sends for it (ItemOf): an item built with param.Override from
// raw JSON is stored as those bytes.
func (h *History) AddInput(ctx context.Context, items ...responses.ResponseInputItemUnionParam) error {
	its, err := ItemsOf(items)
	if err != nil {
		return err
	}
	return session.Append(ctx, h.s, its)
}

// AddJSON appends input items given as JSON objects, as one batch, byte
// for byte.
func (h *History) AddJSON(ctx context.Context, items ...json.RawMessage) error {
	its := make([]session.Item, len(items))
	for i, raw := range items {
		it, err := session.NewItem(raw)
		if err != nil {
			return fmt.Errorf("openaigo: item %d: %w", i, err)
		}
		its[i] = it
	}
	return session.Append(ctx, h.s, its)
}

// AddResponse appends resp's output items, as one batch, byte for byte as
// the API sent them (OutputItems).
func (h *History) AddResponse(ctx context.Context, resp *responses.Response) error {
	its, err := OutputItems(resp)
	if err != nil {
		return err
	}
	return session.Append(ctx, h.s, its)
}

// Items returns the model input window as stored items: history.ModelInput
// over the newest Window items, which drops what the API would reject in a
// window cut out of a longer history (an output without its call, a call
// without its output, an item without its reasoning item, a reasoning item
// without its following item), leaves out the Python SDK's internal keys
// (the stored bytes keep them) and refuses an item holding NaN or an
// infinity with a *history.NonFiniteError.
func (h *History) Items(ctx context.Context) ([]session.Item, error) {
	return history.ModelInput(ctx, h.s, h.window)
}

// Input returns the next request's input items: Items, each as
// param.Override of its stored bytes (InputParams).
func (h *History) Input(ctx context.Context) (responses.ResponseInputParam, error) {
	its, err := h.Items(ctx)
	if err != nil {
		return nil, err
	}
	return InputParams(its), nil
}

// Params returns p with its Input set to the history's input (Input);
// every other field of p is kept. The history replaces whatever p.Input
// held.
func (h *History) Params(ctx context.Context, p responses.ResponseNewParams) (responses.ResponseNewParams, error) {
	in, err := h.Input(ctx)
	if err != nil {
		return p, err
	}
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: in}
	return p, nil
}

// InputParam returns it as a request input item that openai-go encodes as
// the item's own bytes: param.Override of json.RawMessage(it.Bytes()).
// openai-go compacts the JSON it sends (insignificant white space goes);
// it changes nothing else.
func InputParam(it session.Item) responses.ResponseInputItemUnionParam {
	return param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(it.Bytes()))
}

// InputParams returns InputParam of each item, in order.
func InputParams(items []session.Item) responses.ResponseInputParam {
	out := make(responses.ResponseInputParam, len(items))
	for i, it := range items {
		out[i] = InputParam(it)
	}
	return out
}

// ItemOf returns p as a session Item. An item made with param.Override
// from raw JSON (json.RawMessage, []byte, string or session.Item) is
// those bytes, unchanged; any other item is the JSON its MarshalJSON
// writes, as openai-go puts it in a request.
func ItemOf(p responses.ResponseInputItemUnionParam) (session.Item, error) {
	if v, ok := p.Overrides(); ok {
		switch raw := v.(type) {
		case json.RawMessage:
			return session.NewItem(raw)
		case []byte:
			return session.NewItem(raw)
		case string:
			return session.ParseItem(raw)
		case session.Item:
			if !raw.Valid() {
				return session.Item{}, session.ErrInvalidItem
			}
			return raw, nil
		}
	}
	b, err := p.MarshalJSON()
	if err != nil {
		return session.Item{}, fmt.Errorf("openaigo: encode input item: %w", err)
	}
	return session.NewItem(b)
}

// ItemsOf returns ItemOf of each item, in order.
func ItemsOf(items []responses.ResponseInputItemUnionParam) ([]session.Item, error) {
	out := make([]session.Item, len(items))
	for i, p := range items {
		it, err := ItemOf(p)
		if err != nil {
			return nil, fmt.Errorf("openaigo: item %d: %w", i, err)
		}
		out[i] = it
	}
	return out, nil
}

// OutputItems returns resp's output items as session Items, each the raw
// JSON the API sent for it (resp.Output[i].RawJSON()); the typed fields
// are never read. An item without raw JSON is ErrNoRawJSON. A response
// whose output array holds a value that is not a JSON object is refused
// with an error wrapping session.ErrInvalidItem: openai-go leaves such a
// value out of resp.Output, and it is not dropped here either.
func OutputItems(resp *responses.Response) ([]session.Item, error) {
	if resp == nil {
		return nil, errors.New("openaigo: nil response")
	}
	if err := allDecoded(resp); err != nil {
		return nil, err
	}
	out := make([]session.Item, len(resp.Output))
	for i, o := range resp.Output {
		raw := o.RawJSON()
		if raw == "" {
			return nil, fmt.Errorf("%w: output %d of response %q", ErrNoRawJSON, i, resp.ID)
		}
		it, err := session.ParseItem(raw)
		if err != nil {
			return nil, fmt.Errorf("openaigo: output %d of response %q: %w", i, resp.ID, err)
		}
		out[i] = it
	}
	return out, nil
}

// allDecoded reports an error when resp's output array, as received,
// holds more values than openai-go decoded into resp.Output: it leaves out
// a value that is not a JSON object, and marks the field invalid.
func allDecoded(resp *responses.Response) error {
	f := resp.JSON.Output
	if f.Valid() || f.Raw() == "" {
		return nil
	}
	var sent []json.RawMessage
	if err := json.Unmarshal([]byte(f.Raw()), &sent); err != nil || len(sent) == len(resp.Output) {
		return nil
	}
	for i, v := range sent {
		if _, err := session.NewItem(v); err != nil {
			return fmt.Errorf("openaigo: output %d of response %q: %w", i, resp.ID, err)
		}
	}
	return fmt.Errorf("%w: response %q sent %d output items, openai-go decoded %d", session.ErrInvalidItem, resp.ID, len(sent), len(resp.Output))
}

// Codec converts between openai-go's input item union and session.Item
// without loss: Decode is InputParam (the stored bytes, as an override)
// and Encode is ItemOf (an override's bytes as they are, any other item as
// openai-go encodes it). It is the codec for a session whose item type is
// responses.ResponseInputItemUnionParam, such as the sessions of
// github.com/nlpodyssey/openai-agents-go, wrapped with legacy's
// FromLimitSession and ToLimitSession; it satisfies legacy.Codec.
type Codec struct{}

// Encode returns v as an Item (ItemOf).
func (Codec) Encode(v responses.ResponseInputItemUnionParam) (session.Item, error) { return ItemOf(v) }

// Decode returns it as an input item that openai-go sends as its bytes
// (InputParam).
func (Codec) Decode(it session.Item) (responses.ResponseInputItemUnionParam, error) {
	if !it.Valid() {
		return responses.ResponseInputItemUnionParam{}, session.ErrInvalidItem
	}
	return InputParam(it), nil
}
