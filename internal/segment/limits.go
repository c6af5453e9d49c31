package segment

// MaxBlockRecords is the most records a block this store writes holds
// (Config.MaxBlockRecords after defaults).
func (s *Store) MaxBlockRecords() int { return s.cfg.MaxBlockRecords }

// MinBlockRecords is the record count under which a rewritten block is
// merged with a neighbour.
func (s *Store) MinBlockRecords() int { return s.cfg.MinBlockRecords }
