package main

import (
	"fmt"
	"strings"
)

// The compat scenario's rows of the table, its runs and its description.

// onPath picks each repeat's run of path from runs of.
func onPath(reps []compatRun, of func(compatRun) []compatPathRun, path string) []compatPathRun {
	var out []compatPathRun
	for _, r := range reps {
		for _, p := range of(r) {
			if p.Path == path {
				out = append(out, p)
			}
		}
	}
	return out
}

func liveOf(r compatRun) []compatPathRun   { return r.Live }
func replayOf(r compatRun) []compatPathRun { return r.Replay }

// liveCPU is the median over the repeats of path's gateway CPU an event,
// net of the same repeat's answer with no reader.
func liveCPU(reps []compatRun, path string) float64 {
	var xs []float64
	for _, r := range reps {
		if len(r.Live) == 0 {
			continue
		}
		for _, p := range r.Live[1:] {
			if p.Path == path {
				xs = append(xs, p.netPerEvent(r.Live[0].GatewayCPU))
			}
		}
	}
	return median(xs)
}

func (r *results) compatRows(row func(cells ...string)) {
	sz := r.Options.compatSizes()
	if reps := r.Compat.Runs; len(reps) > 0 {
		rate := func(path string) float64 {
			return med(onPath(reps, liveOf, path), func(p compatPathRun) float64 { return p.perSecond() })
		}
		gross := func(path string) float64 {
			return med(onPath(reps, liveOf, path), func(p compatPathRun) float64 { return p.GatewayCPU / float64(p.Events) })
		}
		sse, sseGross := liveCPU(reps, pathSSE), gross(pathSSE)
		var cells, ratios, grossRatios []string
		for _, path := range []string{pathResponses, pathChat, pathUI} {
			c, g := liveCPU(reps, path), gross(path)
			cells = append(cells, fmt.Sprintf("%s %s events/s, %.2f µs (%.2f µs gross)", pathNames[path], num(rate(path)), c, g))
			ratios = append(ratios, ratio(c, sse))
			grossRatios = append(grossRatios, ratio(g, sseGross))
		}
		row(fmt.Sprintf("compat layer, live: `/stream %d 1` read to its end by %d readers on one path at a time "+
			"(gateway CPU an event delivered, less that of the same answer with no reader; gross: all of it)", sz.liveN, sz.readers),
			strings.Join(cells, "; ")+" an event",
			fmt.Sprintf("Tether's SSE (`/v1/tasks/{id}/events`): %s events/s, %.2f µs an event (%.2f µs gross)", num(rate(pathSSE)), sse, sseGross),
			"**"+strings.Join(ratios, " / ")+"** (Responses / Chat / UI); gross "+strings.Join(grossRatios, " / "))

		replay := func(path string, f func(compatPathRun) float64) float64 { return med(onPath(reps, replayOf, path), f) }
		perAnswer := func(p compatPathRun) float64 { return p.perAnswer() }
		perKiB := func(p compatPathRun) float64 { return p.perKiB() }
		perEvent := func(p compatPathRun) float64 { return p.GatewayCPU / float64(max(p.Events, 1)) }
		answers := func(p compatPathRun) float64 { return float64(p.Reads) / p.Seconds }
		events := func(p compatPathRun) float64 { return float64(p.Events) / float64(max(p.Reads, 1)) }
		eventRate := func(p compatPathRun) float64 { return p.perSecond() }
		answerKiB := replay(pathSSE, func(p compatPathRun) float64 { return float64(p.AnswerBytes) / float64(max(p.Reads, 1)) / 1024 })
		stored := replay(pathSSEEvents, events)
		cells, ratios = nil, nil
		for _, path := range []string{pathResponses, pathChat} {
			// What the path sends for a replay decides what it is set
			// against: every stored event (as SSE from Last-Event-ID 0),
			// or the snapshot (as SSE without it).
			if replay(path, events) > stored/2 {
				cells = append(cells, fmt.Sprintf("%s, every event (%.0f an answer): %s events/s, %.2f µs an event (%.0f µs an answer)",
					pathNames[path], replay(path, events), num(replay(path, eventRate)), replay(path, perEvent), replay(path, perAnswer)))
				ratios = append(ratios, fmt.Sprintf("%s %s SSE from Last-Event-ID 0 an event", pathNames[path],
					ratio(replay(path, perEvent), replay(pathSSEEvents, perEvent))))
				continue
			}
			cells = append(cells, fmt.Sprintf("%s, the snapshot (%.0f events): %s answers/s, %.0f µs an answer (%.2f µs a KiB)",
				pathNames[path], replay(path, events), num(replay(path, answers)), replay(path, perAnswer), replay(path, perKiB)))
			ratios = append(ratios, fmt.Sprintf("%s %s the SSE snapshot an answer", pathNames[path],
				ratio(replay(path, perAnswer), replay(pathSSE, perAnswer))))
		}
		row(fmt.Sprintf("compat layer, replay of a finished `/stream %d 0` (%.0f KiB, %.0f stored events) by %d readers, again and again "+
			"(gateway CPU an answer, and an event where every event is sent)", sz.replayN, answerKiB, stored, sz.readers),
			strings.Join(cells, "; "),
			fmt.Sprintf("SSE, the snapshot: %s answers/s, %.0f µs an answer (%.2f µs a KiB); SSE from Last-Event-ID 0, every event: "+
				"%s events/s, %.2f µs an event (%.0f µs an answer)", num(replay(pathSSE, answers)), replay(pathSSE, perAnswer),
				replay(pathSSE, perKiB), num(replay(pathSSEEvents, eventRate)), replay(pathSSEEvents, perEvent), replay(pathSSEEvents, perAnswer)),
			"**"+strings.Join(ratios, "; ")+"**")
	}
	if fast := r.Compat.Fast; len(fast) > 0 {
		var cells, ratios []string
		var sse compatPathRun
		for _, p := range fast {
			if p.Path == pathSSE {
				sse = p
			}
		}
		perEvent := func(p compatPathRun) float64 { return p.GatewayCPU / float64(p.Events) }
		for _, p := range fast {
			if p.Path == pathSSE {
				continue
			}
			cells = append(cells, fmt.Sprintf("%s %s events/s, %.2f µs an event", pathNames[p.Path], num(p.perSecond()), perEvent(p)))
			ratios = append(ratios, ratio(perEvent(p), perEvent(sse)))
		}
		row(fmt.Sprintf("compat layer, a fast long answer: `/stream %d 0` followed live by %d readers on one path at a time "+
			"(gateway CPU an event, the answer's own included)", sz.fastN, sz.fastReaders),
			strings.Join(cells, "; "),
			fmt.Sprintf("SSE: %s events/s, %.2f µs an event", num(sse.perSecond()), perEvent(sse)),
			"**"+strings.Join(ratios, " / ")+"** (Responses / Chat)")
	}
	if c := r.Compat.Resume; c != nil {
		row(fmt.Sprintf("resumed Responses stream (`starting_after`, a running answer, a new connection): time to its first event, %d resumes", c.N),
			fmt.Sprintf("p50 %.2f ms, p99 %.2f ms", c.P50, c.P99),
			fmt.Sprintf("WebSocket subscribe → snapshot on an open tab: p50 %.2f ms, p99 %.2f ms; a new tab (dial, subscribe → snapshot): p50 %.2f ms, p99 %.2f ms",
				c.WSP50, c.WSP99, c.DialP50, c.DialP99),
			fmt.Sprintf("p50 %s (%s the new tab)", ratio(c.P50, c.WSP50), ratio(c.P50, c.DialP50)))
	}
}

func (r *results) compatRuns(list func(name string, xs []string)) {
	var live, replay, all []string
	if a := r.Compat.All; a != nil {
		all = append(all, fmt.Sprintf("%d readers, %s events/s, %.2f µs an event (less the answer's own)", a.Readers,
			num(float64(a.Events)/a.Seconds), (a.GatewayCPU-a.Base)/float64(a.Events)))
	}
	for _, rep := range r.Compat.Runs {
		if len(rep.Live) > 0 {
			base := rep.Live[0]
			xs := []string{fmt.Sprintf("no reader %.0f ms CPU in %.1f s", base.GatewayCPU/1000, base.Seconds)}
			for _, p := range rep.Live[1:] {
				xs = append(xs, fmt.Sprintf("%s %s/s %.2f µs (%.0f events a reader)", pathNames[p.Path], num(p.perSecond()),
					p.netPerEvent(base.GatewayCPU), float64(p.Events)/float64(max(p.Readers, 1))))
			}
			live = append(live, strings.Join(xs, ", "))
		}
		var xs []string
		for _, p := range rep.Replay {
			x := fmt.Sprintf("%s %.1f answers/s %.0f µs an answer %.2f µs an event", pathNames[p.Path],
				float64(p.Reads)/p.Seconds, p.perAnswer(), p.GatewayCPU/float64(p.Events))
			if p.Path == pathSSEEvents {
				x += fmt.Sprintf(" (nats-server %.2f µs an event)", p.NATSCPU/float64(p.Events))
			}
			xs = append(xs, x)
		}
		if len(xs) > 0 {
			replay = append(replay, strings.Join(xs, ", "))
		}
	}
	list("compat live", live)
	list("compat live, every path at once", all)
	list("compat replay", replay)
	var fast []string
	for _, p := range r.Compat.Fast {
		fast = append(fast, fmt.Sprintf("%s %s/s %.2f µs (%.0f events a reader, %.1f s)", pathNames[p.Path], num(p.perSecond()),
			p.GatewayCPU/float64(p.Events), float64(p.Events)/float64(max(p.Readers, 1)), p.Seconds))
	}
	list("compat fast answer", fast)
}

const compatDocs = `- **Compat layer** (PROTOCOL.md section 11 against section 5): every answer is made through
  ` + "`POST /v1/chat/completions`" + ` (its own ` + "`Idempotency-Key`" + ` and ` + "`metadata.conversation_id`" + `), so that each path can
  read the same task: Tether's SSE (` + "`GET /v1/tasks/{id}/events`" + `, one SSE event per task event, the stored JSON
  forwarded), Responses (` + "`GET /v1/responses/{id}?stream=true`" + `), Chat Completions (the same POST again, which
  replays it) and the UI message stream (` + "`GET /v1/chat/{chatId}/stream`" + `, served only while the answer runs).
  Same bearer JWT as the other scenarios. Every reader puts the answer's text back together from its
  stream and checks it against the whole answer. *Live* (the honest comparison: every path delivers
  every delta as it comes): an answer paced at a delta a millisecond; as soon as it exists, readers
  on one path at a time (one gateway's CPU cannot be split between paths that run together) read it
  to its end. The gateway's CPU over the run, per SSE event the readers received: net, less the CPU
  of the same answer with no reader (run in each repeat; it is not small, about a tenth of a core
  while the answer streams, and a busy gateway may share part of it), and gross. The events are each
  path's own: the deltas and, on SSE, about 100 progress events and the status events, which the
  encoders handle but do not send, against their opening and closing events. A reader's attach is
  part of it: a repeated Chat Completions POST is an idempotent submit, the UI stream reads the
  conversation first. Once, every path at once on one answer, as a check. *Fast*: a long answer at
  the runner's full speed followed live by a few readers a path (SSE, Responses, Chat; the UI stream
  is left out, as a fast answer may have ended before its reader asks): how fast each path can
  follow, and its CPU an event, gross. *Replay*: a finished answer read again and again by each
  path's readers (each at least once). SSE without ` + "`Last-Event-ID`" + ` sends it as the snapshot (the whole text in
  one event), SSE with ` + "`Last-Event-ID: 0`" + ` as every stored event (from the gateway's memory of recent events
  and the JetStream log); a compat path is set against whichever of the two it does, as its events an
  answer show: Chat Completions sends the snapshot; a Responses stream from the start replays the
  live stream's deltas for a task of up to 4,096 events (the gateway's bound of a replay from the
  first event; the answer here is below it), the snapshot beyond. *Resume*: on a running answer (` + "`/stream 100000 10`" + `), one at a time and
  interleaved: a Responses stream resumed with ` + "`starting_after`" + ` about ten deltas behind a client that follows it
  (so an event is due at once), on a new connection, timed to the whole of its first event; a
  subscribe on an open WebSocket tab timed to its snapshot; and a new tab (dial, subscribe) timed to
  its snapshot.
`
