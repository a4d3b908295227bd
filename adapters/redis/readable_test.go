package redis

import (
	"context"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/session/driver"
)

// readableCheckScript runs the pop script's readable() on every ARGV and
// returns 1 or 0 for each.
var readableCheckScript = newScript(readableSrc + `
local r = {}
for i, v in ipairs(ARGV) do if readable(v) then r[i] = 1 else r[i] = 0 end end
return r
`)

// serverReadable returns readable() of each record, as the server runs it.
func serverReadable(t *testing.T, st *Store, recs []string) []bool {
	t.Helper()
	out := make([]bool, 0, len(recs))
	inChunks(t, st, readableCheckScript, recs, func(_ []string, vals []int64) {
		for _, v := range vals {
			out = append(out, v == 1)
		}
	})
	return out
}

// inChunks runs sc with recs as its ARGV, 500 at a time, and gives each
// chunk and the script's replies for it to each.
func inChunks(t *testing.T, st *Store, sc *script, recs []string, each func(chunk []string, vals []int64)) {
	t.Helper()
	for len(recs) > 0 {
		chunk := recs[:min(len(recs), 500)]
		recs = recs[len(chunk):]
		argv := make([]any, len(chunk))
		for i, r := range chunk {
			argv[i] = r
		}
		vals, err := st.run(context.Background(), sc, nil, argv...).Int64Slice()
		require.NoError(t, err)
		each(chunk, vals)
	}
}

// readableCorpus are records on both sides of the line: what cjson takes
// and the client refuses (the check must say "not sure"), and what both
// take, in the forms writers produce (the check should say yes).
var readableCorpus = []string{
	`{"a":nan}`, `{"a":-NaN}`, `{"a":NaN(1)}`, `{"a":inf}`, `{"a":infinity}`, `{"a":+Infinity}`,
	`{"a":0x10}`, `{"a":01}`, `{"a":1.}`, `{"a":-.5}`, `{"a":+1}`, `{"a":1.e5}`, `{"a":[1,-]}`,
	"{\"a\":\"\xff\"}", "{\"a\":\"\xc0\xaf\"}", "{\"a\":\"\xed\xa0\x80\"}", "{\"a\":\"\xf4\x90\x80\x80\"}",
	"{\"a\":\"\t\"}", "{\"a\":\"\x00\"}", "{\"a\":\"\x7f\"}", `{"a":"\ud800"}`, ` {"a":1}`, "{\"a\":1}\n",
	`{"a":1} {"b":2}`, `{"a":"x\"y"}`, `{"a":"x\\"}`, `{"a\"":1}`, `{"a":"\\\"}`, `{"a":"é—😀"}`,
	`{"a":1e5,"b":-0.5E-3,"c":0,"d":-0,"e":[true,false,null,NaN,Infinity,-Infinity]}`,
	`{"a" : 1 , "b" : [ 1 , 2 ] }`, `{}`, `{"":{"":[]}}`, `{"a":"}"}`, `{"a":"{"}`,
	`{"a":truex}`, `{"a":nul}`, `{"a":Infinityx}`, `{"a":NaNa}`, `{"a":1e}`, `{"a":--1}`,
}

// TestReadableNeverOverclaims: the server's check says yes only to records
// the client reads (a yes deletes the record in one step), over a corpus
// of edge cases and thousands of random mutations of real items; and it
// says yes to the records writers commonly store, so that PopItem takes
// its one-round-trip path for them.
func TestReadableNeverOverclaims(t *testing.T) {
	st := newStore(t, standaloneClient(t), Options{KeyPrefix: uniquePrefix(t)})
	var recs []string
	recs = append(recs, readableCorpus...)
	recs = append(recs, unreadable...)
	recs = append(recs, nanItems...)
	common := []string{`{"a":"é—😀"}`, `{"x": NaN}`}
	for _, it := range benchItems("r", 3) {
		common = append(common, it.String())
	}
	for _, it := range conformance.Numbered("r", 3) {
		common = append(common, it.String())
	}
	recs = append(recs, common...)
	rng := rand.New(rand.NewSource(1))
	alphabet := []byte("{}[]:,\" \\\t\n0123456789.-+eEaNnIfx\x00\x7f\xc3\xa9\xed\xa0\xff")
	base := append([]string{}, common...)
	base = append(base, `{"a":[1,2.5e-3,{"b":null}],"c":"d\u00e9\n"}`)
	recs = append(recs, mutants(rng, base, alphabet, 4000)...)
	sure := serverReadable(t, st, recs)
	yes, overclaims := 0, 0
	for i, r := range recs {
		_, err := driver.DecodeStoredString(string([]byte(r)))
		if sure[i] {
			yes++
			if err != nil {
				overclaims++
				t.Errorf("the server's check takes %q, which the client refuses: %v", r, err)
			}
		}
	}
	t.Logf("%d records, %d taken by the server's check, %d of them wrongly", len(recs), yes, overclaims)
	at := len(readableCorpus) + len(unreadable) + len(nanItems)
	for i, r := range common {
		require.True(t, sure[at+i], "the check should take %q", r)
	}
	for i, r := range nanItems {
		require.True(t, sure[len(readableCorpus)+len(unreadable)+i], "the check should take %q", r)
	}
}

// TestPopUnsure: records the server's check is not sure of but the client
// reads (a lone \u surrogate, which cjson refuses; surrounding whitespace;
// an indented object) are popped by the client's compare-and-pop, in order,
// none reported; unreadable ones between them stay.
func TestPopUnsure(t *testing.T) {
	for _, tc := range popLayouts {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := tc.client(t)
			var col driver.CorruptLog
			st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), Layout: tc.layout, OnCorrupt: col.Handler()})
			s, err := st.Session("unsure")
			require.NoError(t, err)
			recs := []string{`{"a":"\ud800"}`, "{\"b\":1}\n", "{\n  \"c\": [\n    1\n  ]\n}", " {\"d\":2}"}
			require.NoError(t, s.AddItems(ctx, conformance.Numbered("u", 1)))
			for _, r := range recs {
				require.NoError(t, c.RPush(ctx, s.Keys()[0], r, "junk").Err())
			}
			for i := len(recs) - 1; i >= 0; i-- {
				it, ok, err := s.PopItem(ctx)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, recs[i], it.String())
			}
			it, ok, err := s.PopItem(ctx)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, conformance.Numbered("u", 1)[0].String(), it.String())
			got, err := c.LRange(ctx, s.Keys()[0], 0, -1).Result()
			require.NoError(t, err)
			require.Equal(t, []string{"junk", "junk", "junk", "junk"}, got)
			for _, r := range col.Reports("unsure") {
				require.Equal(t, "junk", string(r.Raw))
			}
		})
	}
}

// readableBothScript returns, for every ARGV, {readable(v), readable_full(v)}
// as 1 or 0.
var readableBothScript = newScript(readableSrc + `
local r = {}
for i, v in ipairs(ARGV) do
  r[2 * i - 1] = readable(v) and 1 or 0
  r[2 * i] = readable_full(v) and 1 or 0
end
return r
`)

// TestReadableFastPathAgrees: readable's fast path (escapes replaced, cjson
// on the skeleton with emptied strings) answers as readable_full does, the
// check TestReadableNeverOverclaims covers, on the edge cases and on
// thousands of mutations of records full of escapes, strings and tokens;
// and it takes every unmutated record.
func TestReadableFastPathAgrees(t *testing.T) {
	st := newStore(t, standaloneClient(t), Options{KeyPrefix: uniquePrefix(t)})
	base := []string{
		`{"a":"x\"y\\z\/w\b\f\n\r\t","b":[1,-2.5e+3,true,false,null,NaN,-Infinity],"c":{"d":""}}`,
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"line\none \"quoted\"\n\tand C:\\path"}]}`,
		`{"k":"\\","l":"\\\"","m":"a\\\\\"b","n":"\u00e9"}`,
		`{"type":"function_call","call_id":"c1","arguments":"{\"x\":1,\"y\":[2,3]}","status":"completed"}`,
	}
	for _, it := range benchItems("f", 2) {
		base = append(base, it.String())
	}
	for _, it := range popItemsOf(600, 1) {
		base = append(base, it.String())
	}
	recs := append([]string{}, base...)
	recs = append(recs, readableCorpus...)
	recs = append(recs, unreadable...)
	recs = append(recs, nanItems...)
	rng := rand.New(rand.NewSource(2))
	alphabet := []byte("{}[]:,\" \\\\\\/_bfnrtu0123456789.-+eEaNIx\t\n\x00\x7f\xc3\xa9\xff")
	recs = append(recs, mutants(rng, base, alphabet, 6000)...)
	yes, fastYes := 0, 0
	inChunks(t, st, readableBothScript, recs, func(chunk []string, vals []int64) {
		require.Len(t, vals, 2*len(chunk))
		for i, r := range chunk {
			fast, full := vals[2*i] == 1, vals[2*i+1] == 1
			if fast != full {
				t.Errorf("readable says %t, readable_full %t, for %q", fast, full, r)
			}
			if full {
				yes++
			}
			_, err := driver.DecodeStoredString(string([]byte(r)))
			if fast && err != nil {
				t.Errorf("readable takes %q, which the client refuses: %v", r, err)
			}
		}
		if fastYes == 0 {
			for i := range base {
				if i < len(chunk) && vals[2*i] == 1 {
					fastYes++
				}
			}
			require.Equal(t, len(base), fastYes, "every base record should be taken")
		}
	})
	t.Logf("%d records taken by both checks", yes)
}

// mutants returns n records, each one of base with one to three bytes
// inserted, deleted or replaced by bytes of alphabet.
func mutants(rng *rand.Rand, base []string, alphabet []byte, n int) []string {
	out := make([]string, 0, n)
	for range n {
		b := []byte(base[rng.Intn(len(base))])
		for k := 1 + rng.Intn(3); k > 0; k-- {
			p := rng.Intn(len(b) + 1)
			c := alphabet[rng.Intn(len(alphabet))]
			switch rng.Intn(3) {
			case 0:
				b = append(b[:p:p], append([]byte{c}, b[p:]...)...)
			case 1:
				if p < len(b) {
					b = append(b[:p:p], b[p+1:]...)
				}
			default:
				if p < len(b) {
					b[p] = c
				}
			}
		}
		out = append(out, string(b))
	}
	return out
}

// FuzzReadable: the pop script's check, as the server runs it, against
// the client's decoder: neither readable nor readable_full ever takes a
// record the client refuses (PopItem deletes what the check takes, in one
// step), and the two agree.
func FuzzReadable(f *testing.F) {
	for _, set := range [][]string{readableCorpus, unreadable, nanItems} {
		for _, r := range set {
			f.Add(r)
		}
	}
	for _, it := range benchItems("f", 2) {
		f.Add(it.String())
	}
	st := newStore(f, standaloneClient(f), Options{KeyPrefix: uniquePrefix(f)})
	f.Fuzz(func(t *testing.T, rec string) {
		inChunks(t, st, readableBothScript, []string{rec}, func(_ []string, vals []int64) {
			require.Len(t, vals, 2)
			fast, full := vals[0] == 1, vals[1] == 1
			if fast != full {
				t.Fatalf("readable says %t, readable_full %t, for %q", fast, full, rec)
			}
			if _, err := driver.DecodeStoredString(rec); full && err != nil {
				t.Fatalf("the server's check takes %q, which the client refuses: %v", rec, err)
			}
		})
	})
}
