package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// FerretDB v1 is not atomic per document on either backend: an update or
// findAndModify reads the matching documents in one statement, applies the
// update in Go and writes the result back by _id in another, so two
// concurrent updates of one document both read the old value and one of
// them is lost (400 acknowledged $inc leave a counter near 70, and a
// conditional pop guarded by the array's size succeeds several times for
// one element). writeSerializer is a Mongo-wire proxy in front of FerretDB
// that runs the write commands of one collection one at a time, each until
// its reply has arrived, which gives every single-document update the
// atomicity MongoDB guarantees. Reads are passed through concurrently: each
// is one statement on the backend and sees committed documents only.

// writeCommands are the commands FerretDB implements as read-then-write.
var writeCommands = map[string]bool{
	"insert": true, "update": true, "delete": true,
	"findAndModify": true, "findandmodify": true,
}

// Wire protocol constants.
const (
	opMsg         = 2013
	msgMoreToCome = 1 << 1
	maxMessage    = 48 << 20
)

// writeSerializer accepts clients on ln and forwards their messages to
// backend, one connection to the backend per client connection.
type writeSerializer struct {
	ln      net.Listener
	backend string

	mu    sync.Mutex
	locks map[string]*sync.Mutex // namespace "db.collection" -> its write lock
}

// newWriteSerializer listens on listen and forwards to backend (host:port).
func newWriteSerializer(listen, backend string) (*writeSerializer, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("write serializer: listen on %s: %w", listen, err)
	}
	return &writeSerializer{ln: ln, backend: backend, locks: map[string]*sync.Mutex{}}, nil
}

// Addr returns the address clients connect to.
func (p *writeSerializer) Addr() string { return p.ln.Addr().String() }

// serve accepts connections until ctx is canceled.
func (p *writeSerializer) serve(ctx context.Context) {
	go func() {
		<-ctx.Done()
		p.ln.Close()
	}()
	var wg sync.WaitGroup
	var conns sync.Map
	for {
		c, err := p.ln.Accept()
		if err != nil {
			break
		}
		conns.Store(c, struct{}{})
		wg.Go(func() {
			defer conns.Delete(c)
			p.handle(ctx, c)
		})
	}
	conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	wg.Wait()
}

// lock returns the write lock of namespace ns.
func (p *writeSerializer) lock(ns string) *sync.Mutex {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.locks[ns]
	if m == nil {
		m = new(sync.Mutex)
		p.locks[ns] = m
	}
	return m
}

// handle forwards one client connection: each request, then its replies.
func (p *writeSerializer) handle(ctx context.Context, client net.Conn) {
	defer client.Close()
	var d net.Dialer
	server, err := d.DialContext(ctx, "tcp", p.backend)
	if err != nil {
		return
	}
	defer server.Close()
	for {
		req, err := readMessage(client)
		if err != nil {
			return
		}
		var m *sync.Mutex
		if ns, ok := writeNamespace(req); ok {
			m = p.lock(ns)
			m.Lock()
		}
		err = p.roundTrip(req, client, server)
		if m != nil {
			m.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// roundTrip sends req to server and copies its replies to client: none
// when req has moreToCome set, else replies until one without moreToCome.
func (p *writeSerializer) roundTrip(req []byte, client, server net.Conn) error {
	if _, err := server.Write(req); err != nil {
		return err
	}
	if msgFlags(req)&msgMoreToCome != 0 {
		return nil
	}
	for {
		reply, err := readMessage(server)
		if err != nil {
			return err
		}
		if _, err := client.Write(reply); err != nil {
			return err
		}
		if msgFlags(reply)&msgMoreToCome == 0 {
			return nil
		}
	}
}

// readMessage reads one whole wire message.
func readMessage(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(hdr[:]))
	if n < 16 || n > maxMessage {
		return nil, fmt.Errorf("bad message length %d", n)
	}
	msg := make([]byte, n)
	copy(msg, hdr[:])
	if _, err := io.ReadFull(r, msg[4:]); err != nil {
		return nil, err
	}
	return msg, nil
}

// msgFlags returns an OP_MSG's flag bits, 0 for other opcodes.
func msgFlags(msg []byte) uint32 {
	if len(msg) < 20 || binary.LittleEndian.Uint32(msg[12:]) != opMsg {
		return 0
	}
	return binary.LittleEndian.Uint32(msg[16:])
}

// writeNamespace reports whether msg is an OP_MSG carrying a write command,
// and its namespace "db.collection".
func writeNamespace(msg []byte) (string, bool) {
	if len(msg) < 21 || binary.LittleEndian.Uint32(msg[12:]) != opMsg {
		return "", false
	}
	// Sections follow the flags; the body (kind 0) is the command.
	b := msg[20:]
	for len(b) > 0 {
		kind := b[0]
		b = b[1:]
		if len(b) < 4 {
			return "", false
		}
		size := int(binary.LittleEndian.Uint32(b))
		if size < 5 || size > len(b) {
			return "", false
		}
		if kind == 0 {
			return commandNamespace(b[:size])
		}
		b = b[size:] // kind 1: a document sequence, size included
	}
	return "", false
}

// commandNamespace reads a command document's first element (the command
// name, whose string value is the collection) and its $db.
func commandNamespace(doc []byte) (string, bool) {
	var cmd, coll, db string
	first := true
	err := topLevel(doc, func(name string, typ byte, val []byte) {
		if first {
			first = false
			cmd = name
			if typ == 0x02 && len(val) >= 5 {
				coll = string(val[4 : len(val)-1])
			}
		}
		if name == "$db" && typ == 0x02 && len(val) >= 5 {
			db = string(val[4 : len(val)-1])
		}
	})
	if err != nil || !writeCommands[cmd] {
		return "", false
	}
	return db + "." + coll, true
}

var errBSON = errors.New("malformed BSON")

// topLevel calls f for each top-level element of a BSON document.
func topLevel(doc []byte, f func(name string, typ byte, val []byte)) error {
	if len(doc) < 5 {
		return errBSON
	}
	b := doc[4 : len(doc)-1]
	for len(b) > 0 {
		typ := b[0]
		end := 1
		for end < len(b) && b[end] != 0 {
			end++
		}
		if end == len(b) {
			return errBSON
		}
		name := string(b[1:end])
		b = b[end+1:]
		size, err := bsonValueSize(typ, b)
		if err != nil || size > len(b) {
			return errBSON
		}
		f(name, typ, b[:size])
		b = b[size:]
	}
	return nil
}

// bsonValueSize returns the size of a value of type typ at the start of b.
func bsonValueSize(typ byte, b []byte) (int, error) {
	u32 := func() (int, error) {
		if len(b) < 4 {
			return 0, errBSON
		}
		return int(binary.LittleEndian.Uint32(b)), nil
	}
	switch typ {
	case 0x01, 0x09, 0x11, 0x12: // double, datetime, timestamp, int64
		return 8, nil
	case 0x02, 0x0D, 0x0E: // string, JS code, symbol
		n, err := u32()
		return 4 + n, err
	case 0x03, 0x04, 0x0F: // document, array, code with scope
		return u32()
	case 0x05: // binary
		n, err := u32()
		return 4 + 1 + n, err
	case 0x07: // ObjectId
		return 12, nil
	case 0x08: // bool
		return 1, nil
	case 0x0A, 0x06, 0xFF, 0x7F: // null, undefined, min/max key
		return 0, nil
	case 0x0B: // regex: two cstrings
		i := 0
		for z := 0; z < 2; z++ {
			for i < len(b) && b[i] != 0 {
				i++
			}
			i++
		}
		return i, nil
	case 0x0C: // DBPointer
		n, err := u32()
		return 4 + n + 12, err
	case 0x10: // int32
		return 4, nil
	case 0x13: // decimal128
		return 16, nil
	}
	return 0, errBSON
}
