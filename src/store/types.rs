//! The rule types stored in text columns, read and written as themselves: a row's consumer kind or
//! backoff is an enum by the time it leaves `store/`, and the schema's check constraints keep the
//! columns to the values these parse.

use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArgumentBuffer, PgTypeInfo, PgValueRef};
use sqlx::{Decode, Encode, Postgres, Type};

use crate::queue::account::AccountStatus;
use crate::queue::consumer::{Backoff, ConsumerKind};

macro_rules! text_column {
    ($ty:ty) => {
        impl Type<Postgres> for $ty {
            fn type_info() -> PgTypeInfo {
                <&str as Type<Postgres>>::type_info()
            }

            fn compatible(ty: &PgTypeInfo) -> bool {
                <&str as Type<Postgres>>::compatible(ty)
            }
        }

        impl<'r> Decode<'r, Postgres> for $ty {
            fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
                let text = <&str as Decode<Postgres>>::decode(value)?;
                <$ty>::parse(text).map_err(|e| e.message.into())
            }
        }

        impl Encode<'_, Postgres> for $ty {
            fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
                <&str as Encode<Postgres>>::encode(self.as_str(), buf)
            }
        }
    };
}

text_column!(ConsumerKind);
text_column!(Backoff);
text_column!(AccountStatus);
