package runtime

// What the attack24b tests read below the handles. Compiled into the
// tests only.

// MethodNamed24b returns the client's method of the full name, nil for none.
func (c *Client) MethodNamed24b(name string) *Method {
	for _, m := range c.methods {
		if m.policy.Name == name {
			return m
		}
	}
	return nil
}

// BudgetAvailable24b is how many retries the method's retry budget would
// allow now, by the client's clock (-1 for a method without a budget).
func (m *methodState) BudgetAvailable24b() int {
	if m.budget == nil {
		return -1
	}
	return m.budget.available(m.client.now())
}
