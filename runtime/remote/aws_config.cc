#include "runtime/remote/aws_config.h"

#include <fstream>
#include <sstream>

namespace sluice::runtime::remote {
namespace {

std::string Env(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  return v != nullptr ? std::string(Trim(v)) : std::string();
}

// The file's sections, and whether it could be read.
IniFile ReadIni(const std::string& path, bool* found) {
  std::ifstream in(path);
  *found = static_cast<bool>(in);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  return ParseIni(text.str());
}

std::string HomeFile(const EnvLookup& env, const char* override_var, const char* name) {
  std::string path = Env(env, override_var);
  if (!path.empty()) {
    if (path.rfind("~/", 0) == 0) path = Env(env, "HOME") + path.substr(1);
    return path;
  }
  const std::string home = Env(env, "HOME");
  return home.empty() ? std::string() : home + "/.aws/" + name;
}

const std::map<std::string, std::string>* Section(const IniFile& ini, const std::string& name) {
  auto it = ini.find(name);
  return it == ini.end() ? nullptr : &it->second;
}

std::string Get(const std::map<std::string, std::string>* section, const char* key) {
  if (section == nullptr) return {};
  auto it = section->find(key);
  return it == section->end() ? std::string() : it->second;
}

}  // namespace

std::string_view Trim(std::string_view s) {
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

IniFile ParseIni(std::string_view text) {
  IniFile ini;
  std::string section;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = Trim(text.substr(0, eol));
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = std::string(Trim(line.substr(1, line.size() - 2)));
      ini[section];
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos || section.empty()) continue;
    ini[section][std::string(Trim(line.substr(0, eq)))] = std::string(Trim(line.substr(eq + 1)));
  }
  return ini;
}

Result<AwsConfig> LoadAwsConfig(const EnvLookup& env) {
  AwsConfig c;
  const std::string named_profile = Env(env, "AWS_PROFILE");
  c.profile = named_profile.empty() ? "default" : named_profile;

  bool have_credentials_file = false, have_config_file = false;
  const std::string credentials_path = HomeFile(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
  const std::string config_path = HomeFile(env, "AWS_CONFIG_FILE", "config");
  const IniFile credentials =
      credentials_path.empty() ? IniFile() : ReadIni(credentials_path, &have_credentials_file);
  const IniFile config = config_path.empty() ? IniFile() : ReadIni(config_path, &have_config_file);
  const auto* cred_section = Section(credentials, c.profile);
  const auto* config_section =
      Section(config, c.profile == "default" ? "default" : "profile " + c.profile);
  if (!named_profile.empty() && cred_section == nullptr && config_section == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "AWS_PROFILE names profile '" + c.profile + "', which neither " +
                         credentials_path + " nor " + config_path + " has",
                     "add a [" + c.profile +
                         "] section to the credentials file, or unset "
                         "AWS_PROFILE");
  }

  c.access_key = Env(env, "AWS_ACCESS_KEY_ID");
  c.secret_key = Env(env, "AWS_SECRET_ACCESS_KEY");
  if (!c.access_key.empty() || !c.secret_key.empty()) {
    c.session_token = Env(env, "AWS_SESSION_TOKEN");
    c.credentials_source = "environment (AWS_ACCESS_KEY_ID)";
  } else {
    for (const auto& [section, path] :
         {std::pair{cred_section, credentials_path}, std::pair{config_section, config_path}}) {
      c.access_key = Get(section, "aws_access_key_id");
      c.secret_key = Get(section, "aws_secret_access_key");
      if (c.access_key.empty() && c.secret_key.empty()) continue;
      c.session_token = Get(section, "aws_session_token");
      c.credentials_source = path + " [" + c.profile + "]";
      break;
    }
  }
  if (c.access_key.empty() != c.secret_key.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "AWS credentials from " + c.credentials_source +
                         " have an access key without a secret key, or a secret without a key",
                     "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or both "
                     "aws_access_key_id and aws_secret_access_key in the profile)");
  }
  if (c.access_key.empty()) c.credentials_source = "none (anonymous requests)";

  c.region = Env(env, "AWS_REGION");
  if (c.region.empty()) c.region = Env(env, "AWS_DEFAULT_REGION");
  if (c.region.empty()) c.region = Get(config_section, "region");
  if (c.region.empty()) c.region = "us-east-1";

  c.endpoint = Env(env, "AWS_ENDPOINT_URL_S3");
  if (c.endpoint.empty()) c.endpoint = Env(env, "AWS_ENDPOINT_URL");
  if (c.endpoint.empty()) c.endpoint = Get(config_section, "endpoint_url");
  while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
  if (!c.endpoint.empty() && c.endpoint.find("://") == std::string::npos) {
    c.endpoint = "https://" + c.endpoint;
  }
  return c;
}

}  // namespace sluice::runtime::remote
