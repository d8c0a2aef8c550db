// Languages Deepgram's Nova-3 streams (monolingual models plus `multi`), from Deepgram's language pages and changelog.
// Shared by provider_a (`supports()`) and the Deepgram fake (which answers 400 for a language the model does not serve).

export const NOVA3_LANGUAGES: ReadonlySet<string> = new Set([
  'multi',
  'en', 'en-US', 'en-GB', 'en-AU', 'en-NZ', 'en-IN', 'en-CA',
  'de', 'de-CH', 'nl', 'nl-BE', 'sv', 'sv-SE', 'da', 'da-DK', 'es', 'es-419', 'fr', 'fr-CA', 'pt', 'pt-BR', 'pt-PT',
  'it', 'tr', 'no', 'id', 'bg', 'cs', 'fi', 'hi', 'hu', 'ja', 'ko', 'ko-KR', 'pl', 'ru', 'uk', 'vi',
  'ca', 'et', 'el', 'lv', 'lt', 'ms', 'ro', 'sk', 'be', 'bn', 'bs', 'hr', 'kn', 'mk', 'mr', 'sr', 'sl', 'ta', 'tl', 'te',
  'he', 'fa', 'ur', 'zh', 'zh-CN', 'zh-Hans', 'zh-TW', 'zh-Hant', 'pa', 'pa-IN', 'ne',
]);
