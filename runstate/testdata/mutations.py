#!/usr/bin/env python3
"""Mutation pass over runstate's guards: each mutation removes or weakens one
guard, runs `go test ./runstate/`, records which tests turn red, and restores
the file. Usage: python3 runstate/testdata/mutations.py [name-substring...]
The results are tabulated in runstate/MUTATIONS.md."""
import subprocess, re, sys, json
import os
root=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..') + '/'
repo=os.path.join(root, '..')
muts=[
 ("single slot (Save)", "save.go", "\t\tif cp.Pending != nil {\n\t\t\treturn SaveResult{}, ErrSlotOccupied\n\t\t}", "\t\tif false {\n\t\t\treturn SaveResult{}, ErrSlotOccupied\n\t\t}"),
 ("single slot (Park over an ordinary record)", "held.go", "\tif w != nil && !w.Held {\n\t\treturn nil, ErrSlotOccupied\n\t}", "\tif false {\n\t\treturn nil, ErrSlotOccupied\n\t}"),
 ("held with before refused (rule 6)", "validate.go", "\tif w.Held && !isNull(before) {", "\tif false && w.Held && !isNull(before) {"),
 ("held keys refused on an ordinary record (rule 8, key check)", "validate.go", "\tif len(missing) == 0 && row.Name == VariantOrdinary && labelHasHeld(label) && allHeldOnly(unexpected) {", "\tif false {"),
 ("held keys refused on held:false (rule 8)", "validate.go", "\t\tif !w.Held {\n\t\t\tfor _, k := range", "\t\tif false {\n\t\t\tfor _, k := range"),
 ("pairing guard (keep unpaired calls)", "held.go", "\t\t} else if keep[i] {", "\t\t} else if keep[i] || true {"),
 ("pairing guard (MCP approvals)", "held.go", "\t\t\tif k, ok := history.CallKey(it); ok && !answered[k.ID] {", "\t\t\tif k, ok := history.CallKey(it); ok && false && !answered[k.ID] {"),
 ("pending-approval exemption", "held.go", "\t\tif !ok || k.Type == history.TypeMCPApprovalRequest || !slices.Contains(pending, k.ID) {", "\t\tif true || !ok || k.Type == history.TypeMCPApprovalRequest || !slices.Contains(pending, k.ID) {"),
 ("pending ids from the step", "save.go", "\treturn cp.Step.PendingCallIDs\n", "\treturn nil\n"),
 ("same-session check (ordinary recovery)", "resume.go", "\tif s == nil || s.SessionID() != w.SessionID {\n\t\treturn false, ErrWrongSession", "\tif s == nil {\n\t\treturn false, ErrWrongSession"),
 ("same-session check (held entry, at boot)", "resume.go", "\tif s != nil && s.SessionID() != w.SessionID {\n\t\treturn SaveResult{}, ErrWrongSession", "\tif false {\n\t\treturn SaveResult{}, ErrWrongSession"),
 ("fail-closed load (rule 2: step)", "validate.go", "\tif step != StepRunAgain && step != StepInterruption {", "\tif false {"),
 ("count: settled held items counted", "save.go", "\tif args.settlingHeld {\n\t\treturn args.Input\n\t}\n\treturn nil", "\treturn nil"),
 ("count: append's own count (not raw held length)", "save.go", "\t\t\tif remaining[d] > 0 {\n\t\t\t\tremaining[d]--\n\t\t\t\tcount++\n\t\t\t}", "\t\t\tremaining[d]--\n\t\t\tcount++"),
 ("in-progress guard", "resume.go", "\tif cp.inProgress {\n\t\treturn false, ErrWriteInProgress\n\t}", "\tif false {\n\t\treturn false, ErrWriteInProgress\n\t}"),
 ("ambiguity refusal (committed == unchanged)", "resume.go", "\t\tif committed == unchanged {", "\t\tif !committed && !unchanged {"),
 ("terminal check before any access", "resume.go", "\tif err := cp.checkResumable(); err != nil {\n\t\treturn SaveResult{}, err\n\t}", ""),
 ("held entry settle only for run-again", "resume.go", "\tif s == nil || cp.Step.Kind != StepRunAgain {", "\tif s == nil {"),
 ("settling batch registers before its append", "save.go", "\tregister := cp.Step.Kind == StepRunAgain || cp.Step.Kind == StepInterruption || settlingHeld", "\tregister := cp.Step.Kind == StepRunAgain || cp.Step.Kind == StepInterruption"),
 ("cover detection drops a redundant batch", "save.go", "\tif settlingHeld && coversHeld(turn.Items, held, turn.Policy) {", "\tif false {"),
 ("filter withdrawal of outputs folded this turn", "save.go", "\t\theld = withdraw(held, cp.filtered(turn.Items, turn.Policy))\n", ""),
 ("compaction: settling batch outputs defer", "save.go", "\tlocal := hasLocalOutputs(args.NewItems) || (args.settlingHeld && hasLocalOutputs(args.Input))", "\tlocal := hasLocalOutputs(args.NewItems)"),
 ("compaction: caller's input never defers", "save.go", "\tlocal := hasLocalOutputs(args.NewItems) || (args.settlingHeld && hasLocalOutputs(args.Input))", "\tlocal := hasLocalOutputs(args.NewItems) || hasLocalOutputs(args.Input)"),
 ("entry settle uses the recorded store", "resume.go", "\t\tStore:        w.Store.Ptr(),\n", ""),
 ("re-park keeps the standing store (presence)", "held.go", "\t\tif w.Store.Present {\n\t\t\trec.Store = w.Store.clone()\n\t\t}", ""),
 ("fold under the record's policy", "held.go", "\tif w != nil && w.ReasoningItemIDPolicy.Present {\n\t\tpolicy = w.ReasoningItemIDPolicy.Ptr()\n\t}", ""),
 ("discard only after the exit succeeded", "held.go", "\tif err := exit(ctx); err != nil {\n\t\treturn err\n\t}\n\tcp.DiscardHeld()", "\tcp.DiscardHeld()\n\tif err := exit(ctx); err != nil {\n\t\treturn err\n\t}"),
 ("held type is a real boolean (rule 5)", "validate.go", "\t\tif !isBool {\n\t\t\treturn nil, bad(RulePendingHeldType", "\t\tif false && !isBool {\n\t\t\treturn nil, bad(RulePendingHeldType"),
 ("unknown label refused", "checkpoint.go", "\tcase !isStr || !supported(label):", "\tcase !isStr:"),
 ("deferral gets the gated run context", "compaction.go", "d.DeferCompaction(session.ContextFor(ctx, s), responseID, store)", "d.DeferCompaction(ctx, responseID, store)"),
 ("a resume forgets earlier runs' folds", "resume.go", "\tcp.folded = nil\n\tif err := cp.checkResumable()", "\tif err := cp.checkResumable()"),
 ("an emptied turn does not withdraw folded outputs", "held.go", "\tif len(cp.folded) == 0 || len(resolved) == 0 {", "\tif len(cp.folded) == 0 {"),
 ("out-of-range float refused (fuzz finding)", "checkpoint.go", "\tif !json.Valid(py) {", "\tif false && !json.Valid(py) {"),
 ("detached exit withdraws what the filter removed (issue 9.6)", "held.go", "\tkept := withdraw(w.Items, cp.filtered(items, w.ReasoningItemIDPolicy.Ptr()))", "\tkept := w.Items"),
 ("a withdrawn output takes its call with it", "held.go", "\t\tif k, ok := history.CallKey(it); ok && gone[k] {\n\t\t\tdrop[i], hit = true, true\n\t\t}", ""),
 ("a reasoning item goes with a withdrawn call", "held.go", "\t\t\tdrop[i] = droppedCallNext\n", "\t\t\tdrop[i] = droppedCallNext && false\n"),
 ("a pending write or the terminal marker is labelled 1.17 or newer (issue 9.5)", "checkpoint.go", "\tif cp.Terminal || cp.Pending != nil {\n\t\traise(pendingWriteSchema)", "\tif false {\n\t\traise(pendingWriteSchema)"),
 ("a held record is labelled 1.18 or newer (issue 9.5)", "checkpoint.go", "\t\tif w.Held || w.heldKey {\n\t\t\traise(heldSchema)", "\t\tif false {\n\t\t\traise(heldSchema)"),
 ("a loaded label is kept, never raised to the newest (issue 9.5)", "checkpoint.go", "\tlabel := cp.Schema\n", "\tlabel := heldSchema\n"),
 ("a later variant's record keeps its row's label", "checkpoint.go", "\t\t\traise(w.label)\n", ""),
]
only = sys.argv[1:] 
results=[]
for name, f, old, new in muts:
    if only and not any(o in name for o in only): continue
    p=root+f
    src=open(p).read()
    if src.count(old)!=1:
        results.append((name, f"MUTATION NOT APPLIED ({src.count(old)} matches)")); continue
    open(p,'w').write(src.replace(old,new))
    try:
        r=subprocess.run(['go','test','-count=1','./runstate/'],cwd=repo,capture_output=True,text=True,timeout=300)
        out=r.stdout+r.stderr
        fails=sorted(set(re.findall(r'--- FAIL: (\S+)', out)))
        top=[x for x in fails]
        if r.returncode==0: status='SURVIVED (all tests green)'
        elif not fails: status='build/other failure: '+out[-300:]
        else: status=', '.join(top)
        results.append((name,status))
    finally:
        open(p,'w').write(src)
for n,s in results:
    print(f"{n}\t{s}")
