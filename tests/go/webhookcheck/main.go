// Command webhookcheck reads what Watchtower writes with Alertmanager's own Go code, so the tests compare
// Watchtower's bytes with Alertmanager's rather than with a second hand-written idea of them.
//
//	webhookcheck body < body.json          decode into notify/webhook.Message (unknown fields refused),
//	                                       write it back as Alertmanager's webhook notifier encodes it
//	webhookcheck fingerprint < sets.json   a JSON array of label sets → one fingerprint per line
//	webhookcheck order < sets.json         the same → their indices in the order a flush sorts alerts
//	webhookcheck route alertmanager.yaml < sets.json
//	                                       per label set, one line per route it lands on:
//	                                       receiver TAB group key TAB escaped receiver
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"

	"github.com/prometheus/alertmanager/alert"
	"github.com/prometheus/alertmanager/config"
	"github.com/prometheus/alertmanager/dispatch"
	"github.com/prometheus/alertmanager/notify/webhook"
	"github.com/prometheus/common/model"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: webhookcheck body|fingerprint|route CONFIG")
	}
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err.Error())
	}
	switch os.Args[1] {
	case "body":
		body(in)
	case "fingerprint":
		for _, ls := range labelSets(in) {
			fmt.Println(ls.Fingerprint().String())
		}
	case "order":
		sets := labelSets(in)
		alerts := make(alert.AlertSlice, len(sets))
		index := map[*alert.Alert]int{}
		for i, ls := range sets {
			alerts[i] = &alert.Alert{Alert: model.Alert{Labels: ls}}
			index[alerts[i]] = i
		}
		sort.Stable(alerts) // as dispatch.aggrGroup.flush
		for _, a := range alerts {
			fmt.Println(index[a])
		}
	case "route":
		if len(os.Args) < 3 {
			fail("route needs the Alertmanager configuration file")
		}
		route(os.Args[2], labelSets(in))
	default:
		fail("unknown mode " + os.Args[1])
	}
}

func body(in []byte) {
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.DisallowUnknownFields()
	var msg webhook.Message
	if err := dec.Decode(&msg); err != nil {
		fail("decode: " + err.Error())
	}
	if dec.More() {
		fail("decode: trailing data after the message")
	}
	// As notify/webhook.Notifier.Notify writes it: an Encoder, so HTML escaping and the trailing newline.
	if err := json.NewEncoder(os.Stdout).Encode(&msg); err != nil {
		fail("encode: " + err.Error())
	}
}

func labelSets(in []byte) []model.LabelSet {
	var sets []model.LabelSet
	if err := json.Unmarshal(in, &sets); err != nil {
		fail("label sets: " + err.Error())
	}
	return sets
}

func route(file string, sets []model.LabelSet) {
	cfg, err := config.LoadFile(file)
	if err != nil {
		fail("config: " + err.Error())
	}
	root := dispatch.NewRoute(cfg.Route, nil)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for _, ls := range sets {
		for _, r := range root.Match(ls) {
			group := model.LabelSet{}
			for ln, lv := range ls {
				if _, ok := r.RouteOpts.GroupBy[ln]; ok || r.RouteOpts.GroupByAll {
					group[ln] = lv
				}
			}
			// dispatch.newAggrGroup: groupKey = fmt.Sprintf("%s:%s", r.Key(), labels);
			// template.Data: Receiver = regexp.QuoteMeta(recv).
			fmt.Fprintf(out, "%s\t%s:%s\t%s\n", r.RouteOpts.Receiver, r.Key(), group, regexp.QuoteMeta(r.RouteOpts.Receiver))
		}
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "webhookcheck:", msg)
	os.Exit(1)
}
