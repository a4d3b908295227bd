package postgres

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// The multi-process test runs this test binary twice more, as writers and
// poppers (TestHelperProcess with these variables set), beside the parent.
const (
	envHelperURL    = "POSTGRES_ADAPTER_HELPER_URL"
	envHelperSchema = "POSTGRES_ADAPTER_HELPER_SCHEMA"
	envHelperWriter = "POSTGRES_ADAPTER_HELPER_WRITER"
)

const (
	mpSession   = "multi-process"
	mpBatches   = 150
	mpBatchSize = 5
	mpPops      = 40
)

// mpWork is mpWorkTo printing each popped item on stdout, one per line,
// for the parent to account for.
func mpWork(ctx context.Context, url, schema, writer string) error {
	var out strings.Builder
	err := mpWorkTo(ctx, url, schema, writer, &out)
	fmt.Print(out.String())
	return err
}

// TestHelperProcess is a writer of TestMultiProcess when run as a child
// process; otherwise it does nothing.
func TestHelperProcess(t *testing.T) {
	url := os.Getenv(envHelperURL)
	if url == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := mpWork(ctx, url, os.Getenv(envHelperSchema), os.Getenv(envHelperWriter)); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
}

// TestMultiProcess: two other processes and this one append batches to one
// session and pop from it, at once. Nothing is lost or duplicated: every
// item appended is either still there or was popped exactly once, and every
// batch still there is whole and contiguous (pops take from the newest, so
// a batch is either whole or a popped prefix of its tail is gone).
func TestMultiProcess(t *testing.T) {
	url := serverURL(t)
	schema := freshSchema(t)
	st := openStore(t, Options{Schema: schema}) // makes the tables first
	ctx := context.Background()

	type child struct {
		cmd *exec.Cmd
		out strings.Builder
	}
	var kids []*child
	for _, w := range []string{"p1", "p2"} {
		k := &child{cmd: exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")}
		k.cmd.Env = append(os.Environ(), envHelperURL+"="+url, envHelperSchema+"="+schema, envHelperWriter+"="+w)
		k.cmd.Stdout = &k.out
		k.cmd.Stderr = os.Stderr
		require.NoError(t, k.cmd.Start())
		kids = append(kids, k)
	}
	var popped []string
	var out strings.Builder
	mine := make(chan error, 1)
	go func() {
		mine <- mpWorkTo(ctx, url, schema, "p0", &out)
	}()
	for _, k := range kids {
		require.NoError(t, k.cmd.Wait(), "child: %s", k.out.String())
	}
	require.NoError(t, <-mine)
	for _, text := range append([]string{out.String()}, kids[0].out.String(), kids[1].out.String()) {
		for _, line := range strings.Split(text, "\n") {
			if p, ok := strings.CutPrefix(line, "POPPED "); ok {
				popped = append(popped, p)
			}
		}
	}
	s, err := st.Session(mpSession)
	require.NoError(t, err)
	left, err := s.Items(ctx)
	require.NoError(t, err)
	total := 3 * mpBatches * mpBatchSize
	require.Equal(t, total, len(left)+len(popped), "kept + popped = appended (%d kept, %d popped)", len(left), len(popped))
	seen := map[string]bool{}
	for _, x := range append(strs(left), popped...) {
		require.False(t, seen[x], "%s seen twice", x)
		seen[x] = true
	}
	// Kept items: each writer's batches in order, each batch's items in
	// order and contiguous.
	type key struct {
		w    string
		b, i int
	}
	parse := func(it session.Item) key {
		w, _ := it.StringField("w")
		b, _ := it.Field("b")
		i, _ := it.Field("i")
		bn, _ := strconv.Atoi(string(b))
		in, _ := strconv.Atoi(string(i))
		return key{w, bn, in}
	}
	last := map[string]key{}
	var prev key
	for n, it := range left {
		k := parse(it)
		if p, ok := last[k.w]; ok {
			require.True(t, k.b > p.b || (k.b == p.b && k.i == p.i+1), "writer %s: %v after %v", k.w, k, p)
		}
		if n > 0 && k.i > 0 {
			require.Equal(t, key{k.w, k.b, k.i - 1}, prev, "batch interleaved at %d", n)
		}
		last[k.w], prev = k, k
	}
}

// mpWorkTo appends mpBatches batches tagged with writer to the shared
// session, popping after every fourth (at most mpPops times), and writes
// each popped item to w as a line "POPPED <item>".
func mpWorkTo(ctx context.Context, url, schema, writer string, w *strings.Builder) error {
	st, err := Open(ctx, url, Options{Schema: schema})
	if err != nil {
		return err
	}
	defer st.Close()
	s, err := st.Session(mpSession)
	if err != nil {
		return err
	}
	pops := 0
	for b := range mpBatches {
		batch := make([]session.Item, mpBatchSize)
		for i := range batch {
			batch[i] = session.MustItem(fmt.Sprintf(`{"w":%q,"b":%d,"i":%d}`, writer, b, i))
		}
		if err := s.AddItems(ctx, batch); err != nil {
			return fmt.Errorf("writer %s batch %d: %w", writer, b, err)
		}
		if b%4 == 3 && pops < mpPops {
			it, ok, err := s.PopItem(ctx)
			if err != nil {
				return fmt.Errorf("writer %s pop: %w", writer, err)
			}
			if ok {
				pops++
				fmt.Fprintf(w, "POPPED %s\n", it)
			}
		}
	}
	return nil
}
