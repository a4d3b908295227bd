package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// The multi-process test runs this test binary twice more as writers
// (TestHelperProcess with these variables set) next to the parent.
const (
	envHelperDB     = "SQLITE_ADAPTER_HELPER_DB"
	envHelperWriter = "SQLITE_ADAPTER_HELPER_WRITER"
)

const (
	mpSession   = "multi-process"
	mpBatches   = 200
	mpBatchSize = 5
)

// mpAppend appends mpBatches batches of mpBatchSize items tagged with
// writer to the shared session, once the file start exists.
func mpAppend(ctx context.Context, path, writer string) error {
	st, err := OpenFile(ctx, path, Options{BusyTimeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer st.Close()
	s, err := st.Session(mpSession)
	if err != nil {
		return err
	}
	// Ready, then wait for the start signal so that all writers overlap.
	if err := os.WriteFile(path+".ready."+writer, nil, 0o600); err != nil {
		return err
	}
	for {
		if _, err := os.Stat(path + ".start"); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	for b := range mpBatches {
		batch := make([]session.Item, mpBatchSize)
		for i := range batch {
			batch[i] = session.MustItem(fmt.Sprintf(`{"w":%q,"b":%d,"i":%d}`, writer, b, i))
		}
		if err := s.AddItems(ctx, batch); err != nil {
			return fmt.Errorf("writer %s batch %d: %w", writer, b, err)
		}
		// A pause, as between turns of a conversation, lets the others in:
		// SQLite's busy wait is not a fair queue.
		time.Sleep(time.Duration(rand.N(500)) * time.Microsecond)
	}
	return nil
}

// TestHelperProcess is a writer of TestMultiProcessAppend when run as a
// child process; otherwise it does nothing.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(envHelperDB)
	if path == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := mpAppend(ctx, path, os.Getenv(envHelperWriter)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func TestMultiProcessAppend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "mp.db")
	// Create the schema first, so the writers race on appends only.
	openStore(t, path, Options{})

	children := []string{"child-1", "child-2"}
	var cmds []*exec.Cmd
	for _, w := range children {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), envHelperDB+"="+path, envHelperWriter+"="+w)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		cmds = append(cmds, cmd)
	}
	parentErr := make(chan error, 1)
	go func() { parentErr <- mpAppend(ctx, path, "parent") }()
	// Start everyone at once.
	for _, w := range append(children, "parent") {
		for {
			if _, err := os.Stat(path + ".ready." + w); err == nil {
				break
			}
			require.NoError(t, ctx.Err(), "writer %s never got ready", w)
			time.Sleep(time.Millisecond)
		}
	}
	require.NoError(t, os.WriteFile(path+".start", nil, 0o600))
	require.NoError(t, <-parentErr)
	for i, cmd := range cmds {
		require.NoError(t, cmd.Wait(), "child %s", children[i])
	}

	st := openStore(t, path, Options{})
	s, err := st.Session(mpSession)
	require.NoError(t, err)
	got, err := s.Items(ctx)
	require.NoError(t, err)
	writers := len(children) + 1
	require.Len(t, got, writers*mpBatches*mpBatchSize, "nothing lost, nothing duplicated")
	next := map[string]int{}
	switches := 0
	prev := ""
	for i := 0; i < len(got); i += mpBatchSize {
		w, _ := got[i].StringField("w")
		for j := range mpBatchSize {
			want := fmt.Sprintf(`{"w":%q,"b":%d,"i":%d}`, w, next[w], j)
			require.Equal(t, want, got[i+j].String(), "batch interleaved or out of order at position %d", i+j)
		}
		next[w]++
		if w != prev {
			switches++
			prev = w
		}
	}
	for _, w := range append(children, "parent") {
		require.Equal(t, mpBatches, next[w], "writer %s", w)
	}
	t.Logf("%d writers, %d items, the writer changed %d times along the history", writers, len(got), switches)
}
