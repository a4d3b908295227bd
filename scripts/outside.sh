#!/usr/bin/env bash
# Follows README.md's "Depend on it" section to the letter, from outside
# the checkout, so that the section cannot rot:
#
#  1. takes the go.mod between the README's marker comments;
#  2. checks that it lists every module of the repository outside internal/
#     (every tracked go.mod), each with its require and replace line;
#  3. in a temporary directory, links the checkout as ../sessions (the path
#     the README's replace lines name) and writes that go.mod byte for byte
#     into a new module, with a program that opens a SQLite session, appends,
#     reads, and uses every nested module; then, for each nested module, a
#     module with only the library's lines and that module's, and a program
#     that uses only those;
#  4. runs go mod tidy, go list -m all, go build and go run in each, and
#     fails if one of them fails, if tidy changed a line of the block (a
#     version, an "// indirect", a replace, the go line, a new toolchain
#     line) or added a requirement on a module of this repository, or if
#     the program does not report each module it uses. go list -m all is
#     the check that a nested module requires no other module of this
#     repository: tidy and build pass even then (no package of it is
#     loaded), but the whole module graph, which go list -m all and every
#     tool reading the graph need, does not resolve.
#
#   scripts/outside.sh          (make outside; part of make test)
set -euo pipefail
: "${GO:=go}"
REPO=$(cd "$(dirname "$0")/.." && pwd)
README=$REPO/README.md
ROOT=github.com/agentsessions/sessions
BEGIN='<!-- scripts/outside.sh builds this go.mod: begin -->'
END='<!-- scripts/outside.sh builds this go.mod: end -->'

fail() {
	echo "outside.sh: FAIL: $*" >&2
	echo "outside.sh: README.md's \"Depend on it\" section does not hold; fix the section or the modules (see scripts/outside.sh)." >&2
	exit 1
}

start=$(date +%s)
elapsed() { local s=$(($(date +%s) - start)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

# 1. The block: the lines between the markers, without the code fence.
grep -qxF "$BEGIN" "$README" || fail "no line '$BEGIN' in README.md"
grep -qxF "$END" "$README" || fail "no line '$END' in README.md"
GOMOD=$(awk -v b="$BEGIN" -v e="$END" '$0 == e { on = 0 } on && !/^```/ { print } $0 == b { on = 1 }' "$README")
[ -n "$GOMOD" ] || fail "the block between the markers is empty"

# The block's modules: the paths of its require lines under $ROOT.
mapfile -t MODS < <(printf '%s\n' "$GOMOD" | awk -v r="$ROOT" '
	$1 == "require" && $2 == "(" { inreq = 1; next }
	inreq && $1 == ")" { inreq = 0; next }
	$1 == "require" && ($2 == r || index($2, r "/") == 1) { print $2; next }
	inreq && ($1 == r || index($1, r "/") == 1) { print $1 }')
printf '%s\n' "${MODS[@]}" | grep -qxF "$ROOT" || fail "the block does not require $ROOT"
for m in "${MODS[@]}"; do
	dir=${m#"$ROOT"}
	dir=${dir#/}
	printf '%s\n' "$GOMOD" | grep -qE "^(replace )?[[:space:]]*$m => \.\./sessions${dir:+/$dir}\$" ||
		fail "the block requires $m but has no line '$m => ../sessions${dir:+/$dir}'"
done

# 2. Every module of the repository outside internal/ is in the block.
if git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1; then
	gomods=$(git -C "$REPO" ls-files -- 'go.mod' '*/go.mod')
else
	gomods=$(cd "$REPO" && find . -name go.mod | sed 's|^\./||')
fi
for f in $gomods; do
	case "/$f" in */internal/* | */testdata/*) continue ;; esac
	[ -f "$REPO/$f" ] || continue
	mod=$(awk '$1 == "module" { print $2; exit }' "$REPO/$f")
	printf '%s\n' "${MODS[@]}" | grep -qxF "$mod" ||
		fail "$f is the module $mod, which the block does not list: add its require and replace lines to README.md, and a use of it to scripts/outside.sh"
done

# The program: main.go uses the library; one file per nested module uses it.
main_go() {
	cat <<'EOF'
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/session"
)

// uses are the checks of the nested modules this program imports.
var uses []func(ctx context.Context, st adapters.Store) (string, error)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "outside-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, err := adapters.Open(ctx, "sqlite://"+filepath.Join(dir, "agent.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	s, err := st.Session("conversation-42")
	if err != nil {
		return err
	}
	items, err := session.ParseItems(`{"role":"user","content":"What's the weather in Paris?"}`)
	if err != nil {
		return err
	}
	if err := session.Append(ctx, s, items); err != nil {
		return err
	}
	got, err := session.All(ctx, s)
	if err != nil {
		return err
	}
	if len(got) != 1 || string(got[0].Bytes()) != string(items[0].Bytes()) {
		return fmt.Errorf("read back %d items, want the 1 appended", len(got))
	}
	fmt.Printf("ok github.com/agentsessions/sessions: appended and read back %s\n", got[0].Bytes())
	for _, use := range uses {
		line, err := use(ctx, st)
		if err != nil {
			return err
		}
		fmt.Println(line)
	}
	return nil
}
EOF
}

# use_go prints the file that uses module $1, or fails for a module it does
# not know.
use_go() {
	case "$1" in
	"$ROOT/otelsession")
		cat <<'EOF'
package main

import (
	"context"
	"fmt"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/otelsession"
	"github.com/agentsessions/sessions/session"
)

func init() {
	uses = append(uses, func(ctx context.Context, st adapters.Store) (string, error) {
		s, err := st.Session("traced")
		if err != nil {
			return "", err
		}
		w := otelsession.Wrap(s, otelsession.Options{Backend: "sqlite"})
		items, err := session.ParseItems(`{"role":"user","content":"hi"}`, `{"role":"assistant","content":"hello"}`)
		if err != nil {
			return "", err
		}
		if err := session.Append(ctx, w, items); err != nil {
			return "", err
		}
		got, err := session.All(ctx, w)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("ok github.com/agentsessions/sessions/otelsession: %d items through the wrapper", len(got)), nil
	})
}
EOF
		;;
	"$ROOT/integrations/openaigo")
		cat <<'EOF'
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/openai/openai-go/v3/responses"
)

func init() {
	uses = append(uses, func(ctx context.Context, st adapters.Store) (string, error) {
		s, err := st.Session("openai")
		if err != nil {
			return "", err
		}
		h := openaigo.New(s, openaigo.Options{Window: 50})
		if err := h.AddJSON(ctx, json.RawMessage(`{"role":"user","content":"Weather in Paris?"}`)); err != nil {
			return "", err
		}
		params, err := h.Params(ctx, responses.ResponseNewParams{Model: "gpt-5"})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("ok github.com/agentsessions/sessions/integrations/openaigo: a request of %d input items", len(params.Input.OfInputItemList)), nil
	})
}
EOF
		;;
	"$ROOT/adapters/dapr")
		# No sidecar here: the program checks that the import registered the
		# dapr:// scheme and that its URL is validated before any dial.
		cat <<'EOF'
package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/dapr"
)

func init() {
	uses = append(uses, func(ctx context.Context, _ adapters.Store) (string, error) {
		_, err := adapters.Open(ctx, "dapr://localhost:50001/statestore?consistency=sometimes")
		if !errors.Is(err, adapters.ErrInvalidDSN) {
			return "", fmt.Errorf("dapr:// with a bad consistency: %v, want adapters.ErrInvalidDSN", err)
		}
		return "ok github.com/agentsessions/sessions/adapters/dapr: dapr:// registered, a bad URL refused before any dial", nil
	})
}
EOF
		;;
	"$ROOT/integrations/eino")
		cat <<'EOF'
package main

import (
	"context"
	"fmt"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/integrations/eino"
)

func init() {
	uses = append(uses, func(ctx context.Context, st adapters.Store) (string, error) {
		cps, err := eino.New(st, eino.WithPrefix("eino:"))
		if err != nil {
			return "", err
		}
		if err := cps.Set(ctx, "order-42", []byte("checkpoint")); err != nil {
			return "", err
		}
		b, ok, err := cps.Get(ctx, "order-42")
		if err != nil || !ok {
			return "", fmt.Errorf("eino checkpoint order-42: found %v, %v", ok, err)
		}
		return fmt.Sprintf("ok github.com/agentsessions/sessions/integrations/eino: checkpoint order-42 kept (%d bytes)", len(b)), nil
	})
}
EOF
		;;
	"$ROOT/integrations/eino/events")
		cat <<'EOF'
package main

import (
	"context"
	"fmt"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/schema"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/integrations/eino/events"
)

func init() {
	uses = append(uses, func(ctx context.Context, st adapters.Store) (string, error) {
		store, err := events.New[*schema.Message](st, events.Options{})
		if err != nil {
			return "", err
		}
		ev := []*adk.SessionEvent[*schema.Message]{{EventID: "e1", Kind: adk.SessionEventMessage, Message: schema.UserMessage("hi")}}
		if err := store.AppendEvents(ctx, "chat-1", ev); err != nil {
			return "", err
		}
		res, err := store.LoadEvents(ctx, "chat-1", &adk.LoadSessionEventsRequest{})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("ok github.com/agentsessions/sessions/integrations/eino/events: %d event(s) in chat-1", len(res.Events)), nil
	})
}
EOF
		;;
	"$ROOT/integrations/genkit")
		cat <<'EOF'
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/firebase/genkit/go/ai/exp"

	"github.com/agentsessions/sessions/adapters"
	genkitstore "github.com/agentsessions/sessions/integrations/genkit"
)

func init() {
	uses = append(uses, func(ctx context.Context, st adapters.Store) (string, error) {
		type state struct{ Approved bool }
		store, err := genkitstore.New[state](st, genkitstore.Options{})
		if err != nil {
			return "", err
		}
		_, err = store.SaveSnapshot(ctx, "", func(*exp.SessionSnapshot[state]) (*exp.SessionSnapshot[state], error) {
			return &exp.SessionSnapshot[state]{SessionID: "order-42", CreatedAt: time.Now()}, nil
		})
		if err != nil {
			return "", err
		}
		latest, err := store.GetLatestSnapshot(ctx, "order-42")
		if err != nil || latest == nil {
			return "", fmt.Errorf("genkit snapshot of order-42: %v, %v", latest, err)
		}
		return fmt.Sprintf("ok github.com/agentsessions/sessions/integrations/genkit: snapshot of order-42 kept (%s)", latest.Status), nil
	})
}
EOF
		;;
	*) return 1 ;;
	esac
}

# ours prints the lines of a go.mod that name a module of this repository,
# and its go and toolchain lines: what go mod tidy must leave as written.
ours() {
	grep -E "^(go |toolchain )|(^|[[:space:]])$ROOT(/[^[:space:]]*)?[[:space:]]" "$1" | sed 's/[[:space:]]\+/ /g; s/^ //' || true
}

TMP=$(mktemp -d -t outside-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
ln -s "$REPO" "$TMP/sessions"
export GOWORK=off

# short prints module $1's path in the repository with - for /
# (integrations-eino-events), a name for its directory and file.
short() {
	local p=${1#"$ROOT"/}
	printf '%s\n' "${p//\//-}"
}

# build NAME GOMOD MODULE...: a module in $TMP/NAME with GOMOD as its
# go.mod and a program using MODULE...
build() {
	local name=$1 gomod=$2
	shift 2
	local d=$TMP/$name
	mkdir "$d"
	printf '%s\n' "$gomod" >"$d/go.mod"
	main_go >"$d/main.go"
	local want="ok $ROOT"
	for m in "$@"; do
		[ "$m" = "$ROOT" ] && continue
		use_go "$m" >"$d/$(short "$m").go" || fail "scripts/outside.sh has no use of $m: add one to use_go"
		want+=$'\n'"ok $m"
	done
	local t0 times=""
	t0=$(date +%s)
	(cd "$d" && "$GO" mod tidy) || fail "$name: go mod tidy failed with the README's go.mod"
	if ! diff <(printf '%s\n' "$gomod" >"$TMP/want.mod" && ours "$TMP/want.mod") <(ours "$d/go.mod") >"$TMP/diff"; then
		echo "--- go.mod as the README says / +++ after go mod tidy (lines of this repository's modules, go, toolchain):" >&2
		cat "$TMP/diff" >&2
		fail "$name: go mod tidy changed the README's lines"
	fi
	(cd "$d" && "$GO" list -m all >/dev/null) ||
		fail "$name: the module graph does not resolve (go list -m all): a module requires one of this repository's modules the README's lines for it do not replace"
	times+="tidy and list $(($(date +%s) - t0))s"
	t0=$(date +%s)
	(cd "$d" && "$GO" build ./...) || fail "$name: go build failed"
	times+=", build $(($(date +%s) - t0))s"
	t0=$(date +%s)
	local out
	out=$(cd "$d" && "$GO" run .) || fail "$name: go run failed"
	times+=", run $(($(date +%s) - t0))s"
	printf '%s\n' "$out" | sed "s/^/    /"
	[ "$(printf '%s\n' "$out" | cut -d: -f1 | sort)" = "$(printf '%s\n' "$want" | sort)" ] ||
		fail "$name: the program reported other modules than it uses; want:"$'\n'"$want"
	echo "outside.sh: [$(elapsed)] $name: go mod tidy, go list -m all, go build, go run: ok, the README's lines unchanged ($times)"
}

echo "outside.sh: README.md's go.mod, in $TMP/all (../sessions -> $REPO): ${MODS[*]}"
build all "$GOMOD" "${MODS[@]}"
for m in "${MODS[@]}"; do
	[ "$m" = "$ROOT" ] && continue
	# The block without the lines of the other nested modules.
	sub=$(printf '%s\n' "$GOMOD" | awk -v r="$ROOT" -v keep="$m" '{
		p = $1
		if (p == "require" || p == "replace") p = $2
		if (index(p, r "/") == 1 && p != keep) next
		print
	}')
	build "$(short "$m")" "$sub" "$ROOT" "$m"
done
echo "outside.sh: [$(elapsed)] every module builds from outside as README.md says"
