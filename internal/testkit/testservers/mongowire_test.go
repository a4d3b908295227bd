package testservers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
)

// A few hand-written BSON and OP_MSG bytes, enough to send hello and ping
// to a Mongo-wire server without a driver in this module.

func bsonDoc(elems ...[]byte) []byte {
	var body []byte
	for _, e := range elems {
		body = append(body, e...)
	}
	doc := binary.LittleEndian.AppendUint32(nil, uint32(4+len(body)+1))
	doc = append(doc, body...)
	return append(doc, 0)
}

func bsonInt32(name string, v int32) []byte {
	b := append([]byte{0x10}, name...)
	b = append(b, 0)
	return binary.LittleEndian.AppendUint32(b, uint32(v))
}

func bsonString(name, v string) []byte {
	b := append([]byte{0x02}, name...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)+1))
	b = append(b, v...)
	return append(b, 0)
}

const opMsgCode = 2013

// opMsg sends cmd as an OP_MSG with one body section and returns the
// top-level fields of the reply that decodeTop understands.
func opMsg(conn net.Conn, requestID int32, cmd []byte) (map[string]any, error) {
	msg := make([]byte, 16, 16+5+len(cmd))
	binary.LittleEndian.PutUint32(msg[4:], uint32(requestID))
	binary.LittleEndian.PutUint32(msg[12:], opMsgCode)
	msg = binary.LittleEndian.AppendUint32(msg, 0) // flagBits
	msg = append(msg, 0)                           // section kind 0: body
	msg = append(msg, cmd...)
	binary.LittleEndian.PutUint32(msg[0:], uint32(len(msg)))
	if _, err := conn.Write(msg); err != nil {
		return nil, err
	}

	var header [16]byte
	if _, err := io.ReadFull(conn, header[:]); err != nil {
		return nil, err
	}
	length := int(binary.LittleEndian.Uint32(header[0:]))
	if got := int32(binary.LittleEndian.Uint32(header[8:])); got != requestID {
		return nil, fmt.Errorf("reply answers request %d, want %d", got, requestID)
	}
	if op := binary.LittleEndian.Uint32(header[12:]); op != opMsgCode {
		return nil, fmt.Errorf("reply opcode %d, want OP_MSG", op)
	}
	if length < 16+5+5 || length > 48<<20 {
		return nil, fmt.Errorf("bad reply length %d", length)
	}
	rest := make([]byte, length-16)
	if _, err := io.ReadFull(conn, rest); err != nil {
		return nil, err
	}
	if rest[4] != 0 {
		return nil, fmt.Errorf("reply section kind %d, want 0", rest[4])
	}
	return decodeTop(rest[5:])
}

// decodeTop decodes the top-level fields of a BSON document: numbers,
// strings and booleans as Go values, other types as nil (skipped).
func decodeTop(doc []byte) (map[string]any, error) {
	if len(doc) < 5 {
		return nil, errors.New("short BSON document")
	}
	n := int(binary.LittleEndian.Uint32(doc))
	if n > len(doc) || n < 5 {
		return nil, fmt.Errorf("BSON length %d of %d bytes", n, len(doc))
	}
	out := map[string]any{}
	b := doc[4 : n-1]
	for len(b) > 0 {
		typ := b[0]
		end := 1
		for end < len(b) && b[end] != 0 {
			end++
		}
		if end == len(b) {
			return nil, errors.New("unterminated BSON name")
		}
		name := string(b[1:end])
		b = b[end+1:]
		var size int
		var val any
		switch typ {
		case 0x01: // double
			size, val = 8, math.Float64frombits(binary.LittleEndian.Uint64(b))
		case 0x02, 0x0D, 0x0E: // string, JS code, symbol
			size = 4 + int(binary.LittleEndian.Uint32(b))
			val = string(b[4 : size-1])
		case 0x03, 0x04: // document, array
			size = int(binary.LittleEndian.Uint32(b))
		case 0x05: // binary
			size = 4 + 1 + int(binary.LittleEndian.Uint32(b))
		case 0x07: // ObjectId
			size = 12
		case 0x08: // bool
			size, val = 1, b[0] == 1
		case 0x09, 0x11, 0x12: // datetime, timestamp, int64
			size, val = 8, int64(binary.LittleEndian.Uint64(b))
		case 0x0A, 0x06, 0xFF, 0x7F: // null, undefined, min/max key
			size = 0
		case 0x10: // int32
			size, val = 4, int32(binary.LittleEndian.Uint32(b))
		case 0x13: // decimal128
			size = 16
		default:
			return out, fmt.Errorf("BSON type 0x%02x not understood (field %q)", typ, name)
		}
		if size > len(b) {
			return nil, fmt.Errorf("BSON field %q overruns the document", name)
		}
		out[name] = val
		b = b[size:]
	}
	return out, nil
}
