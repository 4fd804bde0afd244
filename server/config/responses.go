package config

// Responses configures the responses /openai/v1/responses stores
// (store: true, the default, as on OpenAI).
type Responses struct {
	// Retention is how long a stored response is kept for GET
	// /openai/v1/responses/{id} and previous_response_id (default 720h,
	// 30 days, as on OpenAI); expired ones are deleted hourly.
	Retention Duration `yaml:"retention"`
}

func (c Config) validateResponses() []string {
	if c.Responses.Retention < 0 {
		return []string{"responses.retention must be positive"}
	}
	return nil
}
