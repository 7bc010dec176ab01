package site

import (
	"encoding/json"
	"strconv"
)

// appendBatchEntry appends e as one JSON line, byte for byte what
// encoding/json's Encoder writes, without its reflection: a discovery
// writes a line per file, and the encoder was a quarter of a policy scan.
func appendBatchEntry(buf []byte, e *batchEntry) []byte {
	buf = append(buf, `{"path":`...)
	buf = appendJSONString(buf, e.Path)
	buf = append(buf, `,"type":`...)
	buf = appendJSONString(buf, e.Type)
	if e.State != "" {
		buf = append(buf, `,"state":`...)
		buf = appendJSONString(buf, string(e.State))
	}
	buf = append(buf, `,"size":`...)
	buf = strconv.AppendInt(buf, e.Size, 10)
	if e.Change != "" {
		buf = append(buf, `,"change":`...)
		buf = appendJSONString(buf, string(e.Change))
	}
	if e.OldPath != "" {
		buf = append(buf, `,"old_path":`...)
		buf = appendJSONString(buf, e.OldPath)
	}
	if e.Mtime != 0 {
		buf = append(buf, `,"mtime":`...)
		buf = strconv.AppendInt(buf, e.Mtime, 10)
	}
	return append(buf, "}\n"...)
}

// appendJSONString quotes s as encoding/json does: printable ASCII other
// than the characters it escapes is copied, anything else goes through
// encoding/json itself.
func appendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}
