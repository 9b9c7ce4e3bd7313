package engine

import "math"

// sampling are the sampling fields of a chat completions request; unset
// ones are left out, so a server applies its own defaults.
type sampling struct {
	Temperature      *float64 `json:"temperature,omitempty"`
	TopP             *float64 `json:"top_p,omitempty"`
	MaxTokens        int      `json:"max_tokens,omitempty"`
	PresencePenalty  *float64 `json:"presence_penalty,omitempty"`
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	Seed             *int64   `json:"seed,omitempty"`
}

// samplingFor is what one Run asks for: the configured temperature and
// token cap, overridden by the task's own options (Input.Options, named as
// in the OpenAI APIs) where a chat completions request has the field. A
// task's token cap only lowers a configured one: the deployer's cap is what
// an answer may cost at most. Values the field cannot take (a cap or seed
// that is not a whole number) are ignored; the server judges the rest.
func (o *OpenAI) samplingFor(opts map[string]float64) sampling {
	s := sampling{Temperature: o.cfg.Temperature, MaxTokens: o.cfg.MaxTokens}
	if v, ok := opts["temperature"]; ok {
		s.Temperature = &v
	}
	if v, ok := opts["top_p"]; ok {
		s.TopP = &v
	}
	if v, ok := opts["presence_penalty"]; ok {
		s.PresencePenalty = &v
	}
	if v, ok := opts["frequency_penalty"]; ok {
		s.FrequencyPenalty = &v
	}
	if v, ok := opts["seed"]; ok && v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		seed := int64(v)
		s.Seed = &seed
	}
	for _, name := range []string{"max_output_tokens", "max_tokens", "max_completion_tokens"} {
		v, ok := opts[name]
		if !ok || v != math.Trunc(v) || v < 1 || v > math.MaxInt32 {
			continue
		}
		if s.MaxTokens == 0 || int(v) < s.MaxTokens {
			s.MaxTokens = int(v)
		}
		break
	}
	return s
}

// systemPrompt is the system message of one Run: the configured prompt
// first, then the task's own instructions (Input.Instructions), a blank
// line between them; "" sends none.
func systemPrompt(configured, instructions string) string {
	switch {
	case configured == "":
		return instructions
	case instructions == "":
		return configured
	}
	return configured + "\n\n" + instructions
}
