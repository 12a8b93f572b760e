-- Written by tugboat: request body limits (the proxy-body-size key) for bodies whose
-- length is not known in advance (Transfer-Encoding: chunked, HTTP/2 without
-- Content-Length). Every change here is overwritten by the next update.
--
--   filter lua.tugboat_body_limit
--
-- Declared on the backend that the requests of such bodies go through (and only
-- those): the frontend left the route's limit, in bytes, in txn.body_limit. The
-- filter counts the body's bytes as they pass and lets through only what stays
-- within the limit; the first bytes past it end the transaction with an error, which
-- the backend answers with its 413 error file (txn.body_too_large tells the log),
-- so a body over the limit never reaches the service whole.

local BodyLimit = {}
BodyLimit.id = "tugboat body limit"
BodyLimit.flags = filter.FLT_CFG_FL_HTX
BodyLimit.__index = BodyLimit

function BodyLimit:new()
  local instance = { seen = 0, limit = nil }
  setmetatable(instance, BodyLimit)
  return instance
end

function BodyLimit:start_analyze(txn, chn)
  if chn:is_resp() then
    return
  end
  local limit = tonumber(txn:get_var("txn.body_limit"))
  if limit ~= nil then
    self.limit = limit
    filter.register_data_filter(self, chn)
  end
end

function BodyLimit:http_payload(txn, msg)
  -- The payload's bytes only (no chunk framing, no trailers); what passes this call
  -- is forwarded whole, so the next call sees only new bytes.
  local data = msg:body()
  if data ~= nil then
    self.seen = self.seen + #data
  end
  if self.seen > self.limit then
    txn:set_var("txn.body_too_large", 1)
    -- An error is the one way a Lua filter can stop the transaction and have the
    -- backend's error file answer; haproxy logs it with this text.
    error("request body over the route's proxy-body-size: refused with 413", 0)
  end
end

core.register_filter("tugboat_body_limit", BodyLimit, function(instance, args)
  return instance
end)
