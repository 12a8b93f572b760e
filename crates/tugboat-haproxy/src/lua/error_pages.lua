-- Written by tugboat: error pages from a backend (the custom-http-errors key). Every
-- change here is overwritten by the next update.
--
--   http-response lua.tugboat_error_page BACKEND ADDRESS
--
-- BACKEND: the haproxy backend whose answer replaces the response. ADDRESS: the
-- internal frontend (abns@...) that sends a request to the backend its
-- X-Tugboat-Backend header names. Both were written by the controller (no spaces,
-- quotes or other config syntax). The request rules left in variables what the
-- response no longer has: txn.error_host, txn.error_format (Accept), txn.error_id
-- (X-Request-ID), txn.error_ns and txn.error_ingress; txn.backend is the backend that
-- answered (<namespace>_<service>_<port>).
--
-- The error backend is asked GET / with the headers ingress-nginx sends; its status,
-- headers and body go to the client as they are. When it does not answer, the
-- backend's own response goes on unchanged.

-- Per attempt: haproxy's HTTP client tries again on its own (3 retries by default).
local TIMEOUT_MS = 5000

-- Answer headers not passed on: haproxy writes the framing of the reply itself.
local NOT_PASSED = {
  ["content-length"] = true,
  ["transfer-encoding"] = true,
  ["connection"] = true,
  ["keep-alive"] = true,
  ["te"] = true,
  ["trailer"] = true,
  ["upgrade"] = true,
}

-- The values of one header, in order, whether the table counts from 0 or 1.
local function values_of(values)
  local list = {}
  if type(values) ~= "table" then
    return list
  end
  local index = 0
  if values[0] == nil then
    index = 1
  end
  while values[index] ~= nil and #list < 100 do
    list[#list + 1] = values[index]
    index = index + 1
  end
  return list
end

local function error_page(txn, backend, address)
  local function var(name)
    local value = txn:get_var(name)
    if value == nil then
      return ""
    end
    return tostring(value)
  end
  local answered_by = var("txn.backend")
  local _, service, port = string.match(answered_by, "^([^_]*)_([^_]*)_(.*)$")
  local headers = {
    ["host"] = { var("txn.error_host") },
    ["x-code"] = { tostring(txn.sf:status()) },
    ["x-format"] = { var("txn.error_format") },
    ["x-original-uri"] = { txn.sf:capture_req_uri() or "" },
    ["x-namespace"] = { var("txn.error_ns") },
    ["x-ingress-name"] = { var("txn.error_ingress") },
    ["x-service-name"] = { service or "" },
    ["x-service-port"] = { port or "" },
    ["x-request-id"] = { var("txn.error_id") },
    ["x-forwarded-for"] = { txn.sf:src() or "" },
    ["x-tugboat-backend"] = { backend },
  }
  local ok, response = pcall(function()
    local client = core.httpclient()
    return client:get({
      url = "http://tugboat-error-pages/",
      dst = address,
      headers = headers,
      timeout = TIMEOUT_MS,
    })
  end)
  if not ok or type(response) ~= "table" or type(response.status) ~= "number"
      or response.status == 0 then
    txn:Warning("tugboat error pages: no answer from backend " .. backend)
    return
  end
  local reply = txn:reply({ status = response.status, body = response.body or "" })
  for name, values in pairs(response.headers or {}) do
    if not NOT_PASSED[name] then
      for _, value in ipairs(values_of(values)) do
        reply:add_header(name, value)
      end
    end
  end
  txn:done(reply)
end

core.register_action("tugboat_error_page", { "http-res" }, error_page, 2)
