-- Written by tugboat: external authentication (the auth-url key). Every change here
-- is overwritten by the next update.
--
--   http-request lua.tugboat_auth METHOD URL HEADERS SIGNIN
--
-- HEADERS: the authentication answer's headers set on the request, separated by
-- commas, or "-". SIGNIN: where a 401 sends the client, or "-". The arguments were
-- validated by the controller (no spaces, quotes or other config syntax). URL and
-- SIGNIN may hold nginx variables ($host, ${scheme}, $http_x_name...), filled in
-- here per request.
--
-- The action only decides: it sets txn.tugboat_auth to "allow", "signin", "401" or
-- "403" (and txn.tugboat_auth_location for "signin", txn.tugboat_auth_challenge for a
-- 401 with a WWW-Authenticate header); the frontend's rules answer, and
-- refuse with 500 whatever is not "allow", so an error here never lets a request by.

-- Per attempt: haproxy's HTTP client tries 4 times (2.6 to 3.4 by default), so a
-- service that never answers costs at most about 10 seconds.
local TIMEOUT_MS = 2500

-- Request headers not passed on: hop-by-hop ones, the body's, the Host (the client
-- sets the authentication service's), and those set below.
local NOT_PASSED = {
  ["host"] = true,
  ["content-length"] = true,
  ["transfer-encoding"] = true,
  ["connection"] = true,
  ["keep-alive"] = true,
  ["te"] = true,
  ["trailer"] = true,
  ["upgrade"] = true,
  ["expect"] = true,
  ["proxy-connection"] = true,
  ["x-original-url"] = true,
  ["x-original-uri"] = true,
  ["x-original-method"] = true,
  ["x-scheme"] = true,
  ["x-forwarded-host"] = true,
  ["x-forwarded-proto"] = true,
  ["x-real-ip"] = true,
  ["x-auth-request-redirect"] = true,
}

local SENDERS = { GET = "get", HEAD = "head", POST = "post", PUT = "put", DELETE = "delete" }

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

-- Percent-encodes all but unreserved characters, as nginx's $escaped_request_uri.
local function escape_component(text)
  return (string.gsub(text, "[^%w%-%._~]", function(c)
    return string.format("%%%02X", string.byte(c))
  end))
end

-- Percent-encodes what may not stand in a URL as it is (spaces, controls, quotes,
-- non-ASCII, '$'...): a header or query value put into the URL by a variable.
local function escape_loose(text)
  return (string.gsub(text, "[^%w%-%._~!&'%(%)%*%+,;=:@/%?%%]", function(c)
    return string.format("%%%02X", string.byte(c))
  end))
end

-- nginx's $host: the Host header in lower case without its port, or nil when it is
-- not a host name or an address (then no request is sent).
local function host_of(header)
  local host = string.lower(header)
  local bracketed = string.match(host, "^(%[[%x:%.]+%])")
  if bracketed ~= nil then
    return bracketed
  end
  host = string.match(host, "^([^:]*)")
  if host == nil or not string.match(host, "^[%w][%w%.%-]*$") then
    return nil
  end
  return host
end

-- The value of one variable of an auth-url or auth-signin (the controller accepts
-- only these names), or nil when it cannot be filled in.
local function variable(request, name)
  if name == "host" then
    return host_of(request.host)
  elseif name == "scheme" then
    return request.scheme
  elseif name == "request_uri" then
    return escape_loose(request.uri)
  elseif name == "escaped_request_uri" then
    return escape_component(request.uri)
  elseif name == "uri" then
    return escape_loose(request.txn.sf:path() or "/")
  elseif name == "args" or name == "query_string" then
    return escape_loose(request.txn.sf:query() or "")
  elseif name == "is_args" then
    local query = request.txn.sf:query()
    if query ~= nil and query ~= "" then
      return "?"
    end
    return ""
  elseif name == "remote_addr" then
    return request.source
  end
  local header = string.match(name, "^http_(.+)$")
  if header ~= nil then
    local values = values_of(request.headers[(string.gsub(header, "_", "-"))])
    return escape_loose(table.concat(values, ", "))
  end
  local argument = string.match(name, "^arg_(.+)$")
  if argument ~= nil then
    return escape_loose(request.txn.sf:url_param(argument) or "")
  end
  return nil
end

-- The URL with its variables ($name or ${name}) filled in, or nil when one cannot be
-- or the result's host is not a host name or an address.
local function expand(template, request)
  if not string.find(template, "$", 1, true) then
    return template
  end
  local failed = false
  local url = string.gsub(template, "%$({?)([%w_]+)(}?)", function(open, name, close)
    local value = variable(request, name)
    if value == nil then
      failed = true
      return ""
    end
    if open == "" then
      return value .. close
    end
    return value
  end)
  local authority = string.match(url, "^https?://([^/%?]+)")
  if failed or authority == nil then
    return nil
  end
  local host = string.gsub(authority, ":%d+$", "")
  if not (string.match(host, "^[%w][%w%.%-]*$") or string.match(host, "^%[[%x:%.]+%]$")) then
    return nil
  end
  return url
end

local function names_of(list)
  local names = {}
  if list == "-" then
    return names
  end
  for name in string.gmatch(list, "[^,]+") do
    names[#names + 1] = name
  end
  return names
end

local function signin_location(signin, scheme, host, uri)
  if string.find(signin, "[?&]rd=") then
    return signin
  end
  local separator = "?"
  if string.find(signin, "?", 1, true) then
    separator = "&"
  end
  return signin .. separator .. "rd=" .. scheme .. "://" .. host .. escape_component(uri)
end

local function authenticate(txn, method, url, response_headers, signin)
  txn:set_var("txn.tugboat_auth", "error")
  local scheme = "http"
  local tls = txn.f:ssl_fc()
  if tls == true or tls == 1 then
    scheme = "https"
  end
  local host = txn.sf:req_hdr("host") or ""
  -- The path and query (an HTTP/2 request has no absolute URI here: pathq, not url).
  local uri = txn.sf:pathq() or "/"
  local source = txn.sf:src() or ""
  local request_headers = txn.http:req_get_headers()
  local headers = {}
  for name, values in pairs(request_headers) do
    if not NOT_PASSED[name] then
      headers[name] = values_of(values)
    end
  end
  local request = {
    txn = txn, host = host, scheme = scheme, uri = uri, source = source,
    headers = request_headers,
  }
  url = expand(url, request)
  if url == nil then
    txn:Warning("tugboat external authentication: the URL's variables cannot be filled in from this request")
    return
  end
  if signin ~= "-" then
    signin = expand(signin, request)
    if signin == nil then
      txn:Warning("tugboat external authentication: the sign-in URL's variables cannot be filled in from this request")
      return
    end
  end
  headers["x-original-url"] = { scheme .. "://" .. host .. uri }
  headers["x-original-uri"] = { uri }
  headers["x-original-method"] = { txn.sf:method() }
  headers["x-scheme"] = { scheme }
  headers["x-forwarded-host"] = { host }
  headers["x-forwarded-proto"] = { scheme }
  headers["x-real-ip"] = { source }
  headers["x-auth-request-redirect"] = { uri }
  local sender = SENDERS[method]
  if sender == nil then
    return
  end
  local ok, response = pcall(function()
    local client = core.httpclient()
    return client[sender](client, { url = url, headers = headers, timeout = TIMEOUT_MS })
  end)
  if not ok or type(response) ~= "table" or type(response.status) ~= "number" then
    txn:Warning("tugboat external authentication: no answer from " .. url)
    return
  end
  local status = response.status
  if status >= 200 and status < 300 then
    local answer_headers = response.headers or {}
    for _, name in ipairs(names_of(response_headers)) do
      local values = values_of(answer_headers[string.lower(name)])
      txn.http:req_del_header(name)
      if #values > 0 then
        txn.http:req_set_header(name, table.concat(values, ", "))
      end
    end
    txn:set_var("txn.tugboat_auth", "allow")
  elseif status == 401 and signin ~= "-" then
    txn:set_var("txn.tugboat_auth_location", signin_location(signin, scheme, host, uri))
    txn:set_var("txn.tugboat_auth", "signin")
  elseif status == 401 or status == 403 then
    -- As nginx's auth_request: a 401 carries the service's challenge to the client.
    local challenge = values_of((response.headers or {})["www-authenticate"])
    if status == 401 and #challenge > 0 then
      txn:set_var("txn.tugboat_auth_challenge", challenge[1])
    end
    txn:set_var("txn.tugboat_auth", tostring(status))
  else
    txn:Warning("tugboat external authentication: " .. url .. " answered " .. status)
  end
end

core.register_action("tugboat_auth", { "http-req" }, authenticate, 4)
