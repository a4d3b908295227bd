package redis

import (
	"context"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// pusher sends the appends of concurrent callers together. A caller that
// finds no send in flight sends its own command at once (a lone writer
// pays nothing: one command, one round trip, as before); callers that come
// while a send is in flight queue up, and when it returns, the first of
// them sends the whole queue as one pipeline (one write and one read on
// one connection, for the client and the server alike, instead of one per
// caller). Every command is still its own single-key command, atomic on
// its own; a caller returns when its own command has been answered, with
// its own result. Pipelines honour the commands' NoRetry, so a command is
// sent at most once, as alone.
type pusher struct {
	mu      sync.Mutex
	queue   []*pushReq
	sending bool
}

// maxPipeline bounds the commands of one pipeline, and maxPipelinedBytes
// the size of a batch that may join one: a bigger batch is sent alone, at
// once (it is bandwidth-bound anyway), so a pipeline stays well below the
// server's client-query-buffer-limit.
const (
	maxPipeline       = 128
	maxPipelinedBytes = 128 << 10
)

// pushReq is one queued command; done is closed when it has been answered,
// or, with lead set, when its caller is to send the queue.
type pushReq struct {
	cmd  *goredis.IntCmd
	done chan struct{}
	lead bool
}

// do sends cmd, alone or with the commands of concurrent callers, and
// returns when it has been answered.
func (p *pusher) do(ctx context.Context, client goredis.UniversalClient, cmd *goredis.IntCmd) {
	p.mu.Lock()
	if !p.sending {
		p.sending = true
		p.mu.Unlock()
		_ = client.Process(ctx, onceInt{cmd})
		p.next()
		return
	}
	req := &pushReq{cmd: cmd, done: make(chan struct{})}
	p.queue = append(p.queue, req)
	p.mu.Unlock()
	<-req.done
	if !req.lead {
		return
	}
	// This caller sends the queue (its own command first among them), at
	// most maxPipeline commands; the rest go with the next send.
	p.mu.Lock()
	batch := p.queue
	if len(batch) > maxPipeline {
		batch = batch[:maxPipeline:maxPipeline]
		p.queue = append([]*pushReq(nil), p.queue[maxPipeline:]...)
	} else {
		p.queue = nil
	}
	p.mu.Unlock()
	if len(batch) == 1 {
		_ = client.Process(ctx, onceInt{batch[0].cmd})
	} else {
		pipe := client.Pipeline()
		for _, r := range batch {
			_ = pipe.Process(ctx, onceInt{r.cmd})
		}
		_, _ = pipe.Exec(ctx) // each command carries its own result
	}
	for _, r := range batch {
		if r != req {
			close(r.done)
		}
	}
	p.next()
}

// next ends a send: it hands the next send to the first queued caller, or
// marks that no send is in flight.
func (p *pusher) next() {
	p.mu.Lock()
	if len(p.queue) == 0 {
		p.sending = false
		p.mu.Unlock()
		return
	}
	first := p.queue[0]
	p.mu.Unlock()
	first.lead = true
	close(first.done)
}
