package server

import (
	"errors"
	"fmt"
	"strings"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// outcome is the kept result of a request, replayed to its repeats: the
// serialized response or the final status, and the headers and trailers
// the handler set.
type outcome struct {
	response []byte      // proto.Marshal of the response; used when status is nil
	status   *spb.Status // the final status, nil for a response
	header   metadata.MD
	trailer  metadata.MD
}

// The outcome's encoding in a store, protobuf wire format so that fields
// can be added: 1 the response, 2 the status, 3 a header, 4 a trailer
// (each a key, field 1, and a value, field 2).
const (
	fieldResponse protowire.Number = 1
	fieldStatus   protowire.Number = 2
	fieldHeader   protowire.Number = 3
	fieldTrailer  protowire.Number = 4
)

func (o *outcome) encode() ([]byte, error) {
	var b []byte
	if o.status == nil {
		b = protowire.AppendTag(b, fieldResponse, protowire.BytesType)
		b = protowire.AppendBytes(b, o.response)
	} else {
		st, err := proto.Marshal(o.status)
		if err != nil {
			return nil, err
		}
		b = protowire.AppendTag(b, fieldStatus, protowire.BytesType)
		b = protowire.AppendBytes(b, st)
	}
	b = appendMD(b, fieldHeader, o.header)
	b = appendMD(b, fieldTrailer, o.trailer)
	return b, nil
}

func appendMD(b []byte, f protowire.Number, md metadata.MD) []byte {
	for k, vs := range md {
		for _, v := range vs {
			var pair []byte
			pair = protowire.AppendTag(pair, 1, protowire.BytesType)
			pair = protowire.AppendString(pair, k)
			pair = protowire.AppendTag(pair, 2, protowire.BytesType)
			pair = protowire.AppendString(pair, v)
			b = protowire.AppendTag(b, f, protowire.BytesType)
			b = protowire.AppendBytes(b, pair)
		}
	}
	return b
}

var errBadOutcome = errors.New("resilient/server: idempotency entry does not decode")

func decodeOutcome(b []byte) (outcome, error) {
	var o outcome
	seen := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return outcome{}, errBadOutcome
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return outcome{}, errBadOutcome
		}
		b = b[n:]
		switch num {
		case fieldResponse:
			o.response, seen = v, true
		case fieldStatus:
			st := new(spb.Status)
			if err := proto.Unmarshal(v, st); err != nil {
				return outcome{}, fmt.Errorf("%w: status: %v", errBadOutcome, err)
			}
			o.status, seen = st, true
		case fieldHeader, fieldTrailer:
			k, val, err := decodePair(v)
			if err != nil {
				return outcome{}, err
			}
			md := &o.header
			if num == fieldTrailer {
				md = &o.trailer
			}
			if *md == nil {
				*md = metadata.MD{}
			}
			(*md)[k] = append((*md)[k], val)
		}
	}
	if !seen {
		return outcome{}, fmt.Errorf("%w: neither a response nor a status", errBadOutcome)
	}
	return o, nil
}

func decodePair(b []byte) (k, v string, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return "", "", errBadOutcome
		}
		b = b[n:]
		s, n := protowire.ConsumeString(b)
		if n < 0 {
			return "", "", errBadOutcome
		}
		b = b[n:]
		switch num {
		case 1:
			k = s
		case 2:
			v = s
		}
	}
	return k, v, nil
}

// replayable returns the metadata a handler set that a replay sends again:
// its own keys, not the transport's (grpc-…, pseudo-headers, content-type)
// nor the Guard's (ReplayedHeader), nil when none.
func replayable(md metadata.MD) metadata.MD {
	var out metadata.MD
	for k, vs := range md {
		switch {
		case strings.HasPrefix(k, "grpc-"), strings.HasPrefix(k, ":"), k == "content-type", k == "te", k == ReplayedHeader:
			continue
		}
		if out == nil {
			out = metadata.MD{}
		}
		out[k] = append([]string(nil), vs...)
	}
	return out
}
