package vocab

import (
	"bytes"
	"encoding/json"
	"regexp"
)

// Temporal's decorations of an error's text: the wrapper of an activity or
// workflow failure with its ids, and the "(type: …)" an application or
// timeout error appends.
var (
	temporalWrapper = regexp.MustCompile(`(?:activity|child workflow execution|workflow execution) error \([^)]*\): `)
	temporalType    = regexp.MustCompile(` \(type: [^)]*\)`)
)

// CleanErrorText strips Temporal's wording from an error text (a task's,
// a settings task's, an action's, a job's or a C+J change's error, a
// space's error at a site), leaving the messages of the activity and of
// its causes: no stored error and no answer shows workflow, run or event
// ids, or error types. The hub cleans error texts as it records them; the
// API cleans again when it shows them, for rows recorded before.
func CleanErrorText(s string) string {
	return temporalType.ReplaceAllString(temporalWrapper.ReplaceAllString(s, ""), "")
}

// CleanErrorField is CleanErrorText for the "error" member of a JSON
// object (a settings task's results); anything else is returned as it is.
func CleanErrorField(raw json.RawMessage) json.RawMessage {
	var all map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers come back as written
	if dec.Decode(&all) != nil || dec.More() {
		return raw
	}
	msg, ok := all["error"].(string)
	if !ok || CleanErrorText(msg) == msg {
		return raw
	}
	all["error"] = CleanErrorText(msg)
	clean, err := json.Marshal(all)
	if err != nil {
		return raw
	}
	return clean
}
